//! The SQL store is the truth: durable cursors, degraded answers, reconcile
//! and delete — on MariaDB and on PostgreSQL.

use serde_json::{Value, json};

use crate::store::{KINDS, MessageStore, s};
use crate::support::{App, Setup, assert_badge_consistent, assert_key_space_unchanged, message};

async fn app_on(store: &MessageStore) -> App {
    App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await
}

/// The app's way: store the message, then touch (in the conversation's category).
async fn send(app: &App, store: &MessageStore, conversation: &str, seq: u64, sender: &str, members: &[&str]) -> Value {
    let mut touch = message("acme", conversation, seq, 1_000 + seq, sender, members);
    touch["category"] = json!(store.category("acme", conversation).await);
    store.store_message("acme", conversation, seq, 1_000 + seq, sender, &touch["preview"].to_string()).await;
    app.touch(touch).await.body
}

/// A (user, conversation) key of the store's cursors.
fn s2(user: &str, conversation: &str) -> (String, String) {
    (user.to_string(), conversation.to_string())
}

async fn conversation(store: &MessageStore, id: &str, category: &str, members: &[&str]) {
    let members: Vec<String> = members.iter().map(|m| m.to_string()).collect();
    store.create_conversation("acme", id, category, &members).await;
}

#[tokio::test]
async fn read_cursors_are_durable_and_monotonic_in_sql() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        for seq in 1..=5 {
            send(&app, &store, "c1", seq, "u1", &["u1", "u2"]).await;
        }
        assert_eq!(app.mark_read("acme", "u2", "c1", 4).await.body["unread"], 1);
        assert_eq!(app.mark_read("acme", "u2", "c1", 2).await.body["read_seq"], 4);
        let cursors = store.cursors("acme").await;
        assert_eq!(cursors[&("u2".to_string(), "c1".to_string())], 4, "{kind:?}");
        assert_eq!(cursors[&("u1".to_string(), "c1".to_string())], 5, "{kind:?}: touch records the sender's cursor");
        // A second app on the same database: the migration runs again, harmlessly.
        let again = app_on(&store).await;
        assert_eq!(again.mark_read("acme", "u2", "c1", 5).await.body["unread"], 0);
        assert_eq!(store.cursors("acme").await[&("u2".to_string(), "c1".to_string())], 5);
        drop((app, again));
        store.drop_database().await;
    }
}

#[tokio::test]
async fn a_user_redis_lost_is_answered_from_sql_and_rebuilt() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        conversation(&store, "n1", "system", &["u2"]).await;
        for seq in 1..=3 {
            send(&app, &store, "c1", seq, "u1", &["u1", "u2"]).await;
        }
        send(&app, &store, "n1", 1, "bot", &["u2"]).await;
        app.mark_read("acme", "u2", "c1", 1).await;
        let before = app.list("acme", "u2", "limit=20").await.body;
        app.redis.flush_all();

        // Answered from SQL, and loaded: not a failure, so not degraded.
        let degraded = app.list("acme", "u2", "limit=20").await.body;
        assert_eq!(
            (&degraded["source"], &degraded["degraded"]),
            (&json!("sql"), &json!(false)),
            "{kind:?}: {degraded}"
        );
        assert_eq!(degraded["conversations"], before["conversations"], "{kind:?}");
        assert_eq!(
            degraded["badge"],
            json!({"total": 3, "muted": 0, "mentions": 0, "categories": {"chat": 2, "system": 1}})
        );
        // Rebuilt in that request: the next answer comes from Redis.
        let again = app.list("acme", "u2", "limit=20").await.body;
        assert_eq!(
            (again["degraded"].clone(), again["conversations"].clone()),
            (json!(false), before["conversations"].clone())
        );
        let badge = app.badge("acme", "u2").await.body;
        assert_eq!(
            badge,
            json!({"total": 3, "muted": 0, "mentions": 0, "categories": {"chat": 2, "system": 1}, "source": "redis", "degraded": false})
        );
        // A read ahead of any stored message, by a member not loaded yet.
        conversation(&store, "later", "chat", &["u9"]).await;
        let early = app.mark_read("acme", "u9", "later", 3).await.body;
        assert_eq!(
            (early["source"].as_str(), early["read_seq"].as_u64(), early["unread"].as_u64()),
            (Some("sql"), Some(3), Some(0))
        );
        // A user with nothing is loaded once, then answered from Redis.
        assert_eq!(app.badge("acme", "nobody").await.body["source"], "sql");
        assert_eq!(
            app.badge("acme", "nobody").await.body,
            json!({"total": 0, "muted": 0, "mentions": 0, "categories": {}, "source": "redis", "degraded": false})
        );
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test]
async fn with_redis_down_reads_come_from_sql_and_touch_is_refused() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        // One server, which goes down below.
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::one_server() }).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        for seq in 1..=4 {
            send(&app, &store, "c1", seq, "u1", &["u1", "u2"]).await;
        }
        app.redis.kill();
        let touch = message("acme", "c1", 5, 1_005, "u1", &["u1", "u2"]);
        store.store_message("acme", "c1", 5, 1_005, "u1", &touch["preview"].to_string()).await;
        let refused = app.touch(touch).await;
        assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (503, Some("unavailable")), "{kind:?}");

        let list = app.list("acme", "u2", "").await.body;
        assert_eq!(
            (list["degraded"].as_bool(), list["conversations"][0]["unread"].as_u64()),
            (Some(true), Some(5)),
            "{kind:?}: {list}"
        );
        let read = app.mark_read("acme", "u2", "c1", 3).await;
        assert_eq!(read.status, 200, "{:?}", read.body);
        assert_eq!(
            (read.body["degraded"].as_bool(), read.body["read_seq"].as_u64(), read.body["unread"].as_u64()),
            (Some(true), Some(3), Some(2))
        );
        assert_eq!(
            app.badge("acme", "u2").await.body,
            json!({"total": 2, "muted": 0, "mentions": 0, "categories": {"chat": 2}, "source": "sql", "degraded": true})
        );
        assert_eq!(store.cursors("acme").await[&("u2".to_string(), "c1".to_string())], 3);

        // Redis comes back empty: the first read rebuilds, with message 5 and the cursor.
        app.redis.restart();
        let first = app.list("acme", "u2", "").await.body;
        assert_eq!((&first["source"], &first["degraded"]), (&json!("sql"), &json!(false)), "{kind:?}");
        let list = app.list("acme", "u2", "").await.body;
        assert_eq!((list["source"].as_str(), list["conversations"][0]["unread"].as_u64()), (Some("redis"), Some(2)));
        assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 2);
        drop(app);
        store.drop_database().await;
    }
}

/// A read ahead of the touches Redis had (the store holds the message, its
/// touch is on its way) keeps the store's cursor in Redis too: the store
/// bounds the cursor by its own last message, and Redis takes it as it is,
/// rather than bounding it again by the older message it knows, so the
/// touch that comes after counts nothing the user read.
#[tokio::test]
async fn a_read_ahead_of_the_touches_redis_had_keeps_the_stores_cursor() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        send(&app, &store, "c1", 1, "u1", &["u1", "u2"]).await;
        assert_eq!(app.list("acme", "u2", "").await.status, 200, "{kind:?}"); // loaded
        let later = message("acme", "c1", 20_000, 21_000, "u1", &["u1", "u2"]);
        store.store_message("acme", "c1", 20_000, 21_000, "u1", &later["preview"].to_string()).await;
        let read = app.mark_read("acme", "u2", "c1", 20_000).await;
        assert_eq!((read.status, &read.body["read_seq"], &read.body["source"]), (200, &json!(20_000), &json!("redis")));
        assert_eq!(store.cursors("acme").await[&("u2".to_string(), "c1".to_string())], 20_000, "{kind:?}");
        assert_eq!(app.touch(later).await.status, 200, "{kind:?}");
        let row = app.row("acme", "u2", "c1").await.unwrap();
        assert_eq!((&row["read_seq"], &row["unread"]), (&json!(20_000), &json!(0)), "{kind:?}");
        let clean = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await.body;
        assert_eq!((&clean["drifted"], &clean["max_drift"]), (&json!(0), &json!(0)), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// With a SQL store a recall is the conversation's, as the truth counts it:
/// every member stops counting it, whoever the call names, and a stranger
/// the call names gets nothing.
#[tokio::test]
async fn a_recall_reaches_every_member_the_truth_counts_it_for() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        let members = ["u1", "u2", "u3"];
        conversation(&store, "c1", "chat", &members).await;
        for seq in 1..=3 {
            let mut touch = message("acme", "c1", seq, 1_000 + seq, "u1", &members);
            if seq == 3 {
                touch["mentions"] = json!(["u3"]);
            }
            store.store_message("acme", "c1", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            assert_eq!(app.touch(touch).await.status, 200, "{kind:?}");
        }
        for user in ["u2", "u3"] {
            assert_eq!(app.list("acme", user, "").await.status, 200, "{kind:?}"); // loaded
        }
        let recalled = app.recall("acme", "c1", 3, &["u1", "u2", "u9"], None).await;
        assert_eq!((recalled.status, &recalled.body["changed"]), (200, &json!(2)), "{kind:?}: {:?}", recalled.body);
        for user in ["u2", "u3"] {
            let row = app.row("acme", user, "c1").await.unwrap();
            assert_eq!((&row["unread"], &row["mentions"]), (&json!(2), &json!(0)), "{kind:?}: {user}");
        }
        assert!(app.redis.keys().iter().all(|key| !key.contains("{acme:u9}")), "{kind:?}: {:?}", app.redis.keys());
        let clean = app.reconcile(json!({"tenant": "acme", "users": ["u2", "u3"]})).await.body;
        assert_eq!((&clean["drifted"], &clean["max_drift"]), (&json!(0), &json!(0)), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test]
async fn reconcile_reports_and_fixes_injected_drift() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        conversation(&store, "c2", "chat", &["u1", "u2"]).await;
        conversation(&store, "n1", "system", &["u2"]).await;
        for seq in 1..=6 {
            send(&app, &store, "c1", seq, "u1", &["u1", "u2"]).await;
        }
        send(&app, &store, "c2", 1, "u2", &["u1", "u2"]).await;
        send(&app, &store, "n1", 1, "bot", &["u2"]).await;
        app.mark_read("acme", "u2", "c1", 2).await;
        app.list("acme", "u2", "").await; // loaded
        let truth = app.whole_list("acme", "u2", 100).await;
        let clean = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2"]})).await.body;
        assert_eq!(
            clean,
            json!({"checked": 2, "drifted": 0, "fixed": 0, "max_drift": 0, "next_cursor": null}),
            "{kind:?}"
        );

        // Corrupt u2 on purpose: a wrong cursor, a lost conversation, a ghost
        // conversation and a badge out of step.
        let p = "un:v2:{acme:u2}:";
        let mut redis = app.holder(&format!("{p}conv")).connection().unwrap();
        let _: () = redis::cmd("HSET")
            .arg(format!("{p}conv"))
            .arg("c1")
            .arg(r#"6:5:0:0::chat::{"text":"message 6","type":"text"}"#)
            .query(&mut redis)
            .unwrap();
        let _: () = redis::cmd("HDEL").arg(format!("{p}conv")).arg("n1").query(&mut redis).unwrap();
        let _: () = redis::cmd("ZADD").arg(format!("{p}list")).arg(9_999_000).arg("ghost").query(&mut redis).unwrap();
        let _: () =
            redis::cmd("HSET").arg(format!("{p}conv")).arg("ghost").arg("9:0:0:0::chat::{}").query(&mut redis).unwrap();
        let _: () = redis::cmd("HINCRBY").arg(format!("{p}badge")).arg("chat").arg(7).query(&mut redis).unwrap();

        let report = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2"]})).await.body;
        assert_eq!(
            report,
            json!({"checked": 2, "drifted": 1, "fixed": 1, "max_drift": 9, "next_cursor": null}),
            "{kind:?}"
        );
        assert_eq!(app.whole_list("acme", "u2", 100).await, truth, "{kind:?}");
        assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 5);
        let after = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await.body;
        assert_eq!((after["drifted"].as_u64(), after["max_drift"].as_u64()), (Some(0), Some(0)));
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test]
async fn reconcile_walks_every_user_in_batches() {
    let store = MessageStore::create(crate::store::Kind::Postgres).await;
    let app = app_on(&store).await;
    let users: Vec<String> = (0..450).map(|i| format!("w{i:03}")).collect();
    store.create_conversation("acme", "all", "chat", &users).await;
    store.store_message("acme", "all", 1, 1_001, "w000", "{}").await;
    let report = app.reconcile_all("acme").await;
    // Nothing was ever touched: every member but the sender drifted by one.
    assert_eq!(report, json!({"checked": 450, "drifted": 450, "fixed": 450, "max_drift": 1}));
    assert_eq!(app.badge("acme", "w001").await.body["total"], 1);
    assert_eq!(app.badge("acme", "w000").await.body["total"], 1, "w000's cursor was never recorded by a touch");
    assert_eq!(app.reconcile_all("acme").await["drifted"], 0);
    let page = app.reconcile(json!({"tenant": "acme"})).await.body;
    assert_eq!((page["checked"].as_u64(), page["next_cursor"].as_str()), (Some(200), Some("w199")));
    drop(app);
    store.drop_database().await;
}

#[tokio::test]
async fn deleting_a_conversation_clears_every_member_and_its_cursors() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "g", "chat", &["u1", "u2", "u3"]).await;
        conversation(&store, "d", "chat", &["u1", "u2"]).await;
        for seq in 1..=3 {
            send(&app, &store, "g", seq, "u1", &["u1", "u2", "u3"]).await;
        }
        send(&app, &store, "d", 1, "u1", &["u1", "u2"]).await;
        app.mark_read("acme", "u3", "g", 1).await;
        store.delete_conversation("acme", "g").await;
        let answer = app.delete_conversation("acme", "g", &["u1", "u2", "u3"]).await;
        assert_eq!(answer.body, json!({"conversation": "g", "removed": 3}), "{kind:?}");
        assert_eq!(app.badge("acme", "u2").await.body["total"], 1);
        assert_eq!(app.badge("acme", "u3").await.body["total"], 0);
        assert!(app.whole_list("acme", "u3", 20).await.is_empty());
        assert!(store.cursors("acme").await.keys().all(|(_, c)| c != "g"));
        assert_eq!(app.delete_conversation("acme", "g", &["u1", "u2", "u3"]).await.body["removed"], 0, "a replay");
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test]
async fn cache_only_mode_has_no_reconcile() {
    let app = App::start().await;
    let answer = app.reconcile(json!({"tenant": "acme"})).await;
    assert_eq!((answer.status, answer.body["error"]["code"].as_str()), (409, Some("no_sql_store")));
    // Delete works without SQL too.
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    assert_eq!(app.delete_conversation("acme", "c1", &["u1", "u2"]).await.body["removed"], 2);
    assert!(app.redis.keys().iter().all(|k| !k.contains(":c:")), "{:?}", app.redis.keys());
    let bad = app.reconcile(json!({"tenant": "acme", "users": [], "cursor": "x"})).await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn a_sql_store_that_stops_answering_is_a_503_not_a_hung_request() {
    // Connections to it are accepted (the kernel's backlog) and never answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("postgres://postgres@127.0.0.1:{}/test", silent.local_addr().unwrap().port());
    let app = App::with(Setup { sql_url: Some(url), ..Setup::default() }).await;
    let answer = tokio::time::timeout(std::time::Duration::from_secs(60), app.mark_read("acme", "u2", "c1", 1))
        .await
        .expect("mark-read answers while the SQL store is silent");
    assert_eq!((answer.status, answer.body["error"]["code"].as_str()), (503, Some("unavailable")), "{:?}", answer.body);
    // Why (no answer within the deadline) goes to the operator's log, not into the answer.
    assert!(!answer.body["error"]["message"].as_str().unwrap().contains("no answer"), "{:?}", answer.body);
    assert!(app.redis.keys().is_empty(), "nothing reached Redis: the truth comes first");
}

/// A touch in another category than the conversation's head is refused
/// before anything is written: no sender cursor, no mention in SQL, and
/// Redis as it was.
#[tokio::test]
async fn a_touch_refused_for_its_category_writes_nothing() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        send(&app, &store, "c1", 1, "u1", &["u1", "u2"]).await;
        let mentions = || async { store.rows("SELECT COUNT(*) FROM unread_mentions", &[]).await[0][0].clone() };
        let before = (store.cursors("acme").await, mentions().await);
        let redis_before = app.redis.key_space();
        let mut touch = message("acme", "c1", 2, 1_002, "u1", &["u1", "u2"]);
        touch["category"] = json!("system");
        touch["mentions"] = json!(["u2"]);
        store.store_message("acme", "c1", 2, 1_002, "u1", &touch["preview"].to_string()).await;
        let refused = app.touch(touch).await;
        assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (409, Some("conflict")), "{kind:?}");
        let after = (store.cursors("acme").await, mentions().await);
        assert_eq!(after, before, "{kind:?}: the refused touch wrote SQL");
        assert_key_space_unchanged(&redis_before, &app.redis.key_space(), "the refused touch");
        drop(app);
        store.drop_database().await;
    }
}

/// The app moves a conversation to another category in its view: the next
/// touch, in the new category, is the truth's, though Redis still has the old
/// one. It is not refused (every retry would be, while the store already
/// holds the message): the conversation takes the new category in Redis,
/// its members count the message there, with no drift left for a
/// reconcile, and the touches after it land as usual. In a large
/// conversation too, where a sender who is no member mentions everyone: the
/// members catch up with the message and its mention in the new category.
#[tokio::test]
async fn a_touch_in_the_category_the_app_moved_its_conversation_to_is_taken() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup {
            sql_url: Some(store.url.clone()),
            variables: vec![("large_group_threshold", "3".into())],
            ..Setup::default()
        })
        .await;
        let moved = "UPDATE app_conversations SET category = 'work' WHERE tenant = ? AND conversation = ?";
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        send(&app, &store, "c1", 1, "u1", &["u1", "u2"]).await;
        assert_eq!(app.badge("acme", "u2").await.body["categories"], json!({"chat": 1}), "{kind:?}");
        store.exec(moved, &[s("acme"), s("c1")]).await;
        let answer = send(&app, &store, "c1", 2, "u1", &["u1", "u2"]).await;
        assert_eq!(answer, json!({"applied": true}), "{kind:?}");
        let row = app.row("acme", "u2", "c1").await.unwrap();
        assert_eq!((&row["category"], &row["unread"], &row["last_seq"]), (&json!("work"), &json!(2), &json!(2)));
        assert_eq!(app.badge("acme", "u2").await.body["categories"], json!({"work": 2}), "{kind:?}");
        assert_eq!(app.row("acme", "u1", "c1").await.unwrap()["category"], "work", "{kind:?}");
        assert_eq!(send(&app, &store, "c1", 3, "u1", &["u1", "u2"]).await, json!({"applied": true}), "{kind:?}");
        assert_eq!(app.row("acme", "u2", "c1").await.unwrap()["unread"], 3, "{kind:?}");

        let everyone = ["u1", "u2", "u3", "u4"];
        conversation(&store, "g", "chat", &everyone).await;
        send(&app, &store, "g", 1, "u1", &everyone).await; // names more than 3: large
        store.exec(moved, &[s("acme"), s("g")]).await;
        let mut touch = message("acme", "g", 2, 1_002, "bot", &["bot"]);
        (touch["category"], touch["mention_all"]) = (json!("work"), json!(true));
        store.store_message("acme", "g", 2, 1_002, "bot", &touch["preview"].to_string()).await;
        let answer = app.touch(touch).await;
        assert_eq!((answer.status, &answer.body), (200, &json!({"applied": true})), "{kind:?}");
        for user in ["u2", "u3", "u4"] {
            let row = app.row("acme", user, "g").await.unwrap();
            assert_eq!(
                (&row["category"], &row["unread"], &row["mentions"]),
                (&json!("work"), &json!(2), &json!(1)),
                "{kind:?}: {user}"
            );
            assert_eq!(assert_badge_consistent(&app, "acme", user).await, if user == "u2" { 5 } else { 2 });
        }
        let clean = app.reconcile(json!({"tenant": "acme", "users": everyone})).await.body;
        assert_eq!((&clean["drifted"], &clean["max_drift"]), (&json!(0), &json!(0)), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// A message stored and touched at time `ts` (ms), in a chat conversation.
async fn send_at(
    app: &App,
    store: &MessageStore,
    conversation: &str,
    seq: u64,
    ts: u64,
    sender: &str,
    members: &[&str],
) {
    let touch = message("acme", conversation, seq, ts, sender, members);
    store.store_message("acme", conversation, seq, ts, sender, &touch["preview"].to_string()).await;
    let answer = app.touch(touch).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
}

/// A user with states Redis no longer keeps (more conversations than the
/// list and the kept ones hold) is caught up with a large conversation
/// whose state was among them: its read cursor is the truth's, not 0.
#[tokio::test]
async fn a_large_conversation_redis_no_longer_kept_comes_back_with_its_cursor() {
    for kind in KINDS {
        let (app, store) = with_a_dropped_large_state(kind).await;
        assert_counts_one_unread(&app, kind).await;
        assert_eq!(app.badge("acme", "a").await.body["total"], 1, "{kind:?}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["a"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// The same user, reconciled before any call of theirs caught them up: the
/// reconcile's first look at Redis does not build that conversation's state
/// from a read cursor of 0 (which the user would read until its last
/// attempt rewrote it), and finds nothing to report, since every read of
/// theirs answers from the truth until Redis holds the state again.
#[tokio::test]
async fn a_reconcile_never_counts_a_large_conversation_redis_no_longer_kept_from_zero() {
    for kind in KINDS {
        let (app, store) = with_a_dropped_large_state(kind).await;
        let report = app.reconcile(json!({"tenant": "acme", "users": ["a"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        assert_counts_one_unread(&app, kind).await;
        drop(app);
        store.drop_database().await;
    }
}

/// User a, who read large conversation g, then saw it leave the list and
/// kept (Redis no longer has a's cursor there), and g's next message.
async fn with_a_dropped_large_state(kind: crate::store::Kind) -> (App, MessageStore) {
    let store = MessageStore::create(kind).await;
    let variables = vec![("max_kept", "1".to_string()), ("large_group_threshold", "3".to_string())];
    let setup = Setup { sql_url: Some(store.url.clone()), max_conversations: 1, variables, ..Setup::default() };
    let app = App::with(setup).await;
    conversation(&store, "g", "chat", &["a", "b", "c", "d"]).await;
    conversation(&store, "h", "chat", &["a", "x"]).await;
    conversation(&store, "i", "chat", &["a", "x"]).await;
    send_at(&app, &store, "g", 1, 1_000, "b", &["a", "b", "c", "d"]).await; // large from here
    assert_eq!(app.mark_read("acme", "a", "g", 1).await.body["unread"], 0);
    send_at(&app, &store, "h", 1, 2_000, "x", &["a", "x"]).await;
    send_at(&app, &store, "i", 1, 3_000, "x", &["a", "x"]).await;
    // Read, so that the badge before g's next message is 0, not what g
    // would count then.
    assert_eq!(app.mark_read("acme", "a", "i", 1).await.body["unread"], 0);
    send_at(&app, &store, "g", 2, 4_000, "b", &["b"]).await;
    (app, store)
}

/// a's list: g alone, one unread.
async fn assert_counts_one_unread(app: &App, kind: crate::store::Kind) {
    let list = app.list("acme", "a", "").await.body;
    let rows = list["conversations"].as_array().unwrap();
    assert_eq!(crate::support::ids(rows), ["g"], "{kind:?}: {list}");
    assert_eq!((&rows[0]["unread"], &list["badge"]["total"]), (&json!(1), &json!(1)), "{kind:?}: {list}");
}

/// A recall's preview outlives a rebuild whose truth was read before the
/// app's store took the recall (the rebuild writes the truth's last
/// messages into the heads): for the last message, and for a message
/// recalled before its touch came.
#[tokio::test]
async fn a_recalled_text_stays_recalled_when_the_truth_is_older_than_the_recall() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        conversation(&store, "c2", "chat", &["u1", "u2"]).await;
        send_at(&app, &store, "c1", 1, 1_000, "u1", &["u1", "u2"]).await;
        send_at(&app, &store, "c2", 1, 2_000, "u1", &["u1", "u2"]).await;
        let recalled = json!({"type": "recalled"});
        // c1's last message is recalled; c2's next one is recalled before
        // its touch. The store still shows both texts.
        assert_eq!(app.recall("acme", "c1", 1, &["u1", "u2"], Some(recalled.clone())).await.status, 200);
        let touch = message("acme", "c2", 2, 3_000, "u1", &["u1", "u2"]);
        store.store_message("acme", "c2", 2, 3_000, "u1", &touch["preview"].to_string()).await;
        assert_eq!(app.recall("acme", "c2", 2, &["u1", "u2"], Some(recalled.clone())).await.status, 200);

        let report = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await;
        assert_eq!(report.status, 200, "{kind:?}: {:?}", report.body);
        assert_eq!(app.touch(touch).await.status, 200);
        let list = app.list("acme", "u2", "").await.body;
        let rows = list["conversations"].as_array().unwrap();
        assert_eq!(crate::support::ids(rows), ["c2", "c1"], "{kind:?}: {list}");
        for row in rows {
            assert_eq!(row["preview"], recalled, "{kind:?}: {list}");
        }
        drop(app);
        store.drop_database().await;
    }
}

/// A user with states Redis no longer keeps leaves a listed conversation:
/// the newest conversation takes the place, as the truth has it, even when
/// Redis dropped its state and kept older ones.
#[tokio::test]
async fn the_place_a_conversation_frees_goes_to_the_newest_even_beyond_what_redis_kept() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let variables = vec![("max_kept", "3".to_string())];
        let setup = Setup { sql_url: Some(store.url.clone()), max_conversations: 1, variables, ..Setup::default() };
        let app = App::with(setup).await;
        for id in ["a", "b", "c", "e1", "e2"] {
            conversation(&store, id, "chat", &["u", "x"]).await;
        }
        app.mark_read("acme", "u", "e1", 1).await; // before its first message
        for (id, ts) in [("a", 1_000), ("b", 2_000), ("c", 3_000)] {
            send_at(&app, &store, id, 1, ts, "x", &["u", "x"]).await;
        }
        // Writes to a and to the early e1, e2 keep them young: b, the newest
        // one below the list, is the one Redis drops.
        for (id, seq) in [("a", 1), ("e1", 2), ("e2", 1)] {
            app.mark_read("acme", "u", id, seq).await;
        }
        for muted in [true, false] {
            let answer = app.flag("acme", "u", "a", "mute", json!({"muted": muted})).await;
            assert_eq!(answer.status, 200, "{kind:?}: {:?}", answer.body);
        }
        store.exec("DELETE FROM app_members WHERE tenant = 'acme' AND conversation = 'c' AND user_id = 'u'", &[]).await;
        assert_eq!(app.leave("acme", "c", &["u"]).await.status, 200);

        let list = app.list("acme", "u", "").await.body;
        let rows = list["conversations"].as_array().unwrap();
        assert_eq!(crate::support::ids(rows), ["b"], "{kind:?}: {list}");
        assert_eq!((&rows[0]["unread"], &list["badge"]["total"]), (&json!(1), &json!(1)), "{kind:?}: {list}");

        let report = app.reconcile(json!({"tenant": "acme", "users": ["u"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// A user in more conversations than Redis and the truth's rows hold (the
/// listed ones, then the kept ones) reads, mutes and marks an older one: the
/// answer counts that conversation as the store has it, where before a
/// mark-read answered 0 unread and a setting 404 after writing the store.
#[tokio::test]
async fn a_conversation_beyond_the_kept_ones_is_answered_as_the_store_counts_it() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let variables = vec![("max_kept", "1".to_string())];
        let setup = Setup { sql_url: Some(store.url.clone()), max_conversations: 1, variables, ..Setup::default() };
        let app = App::with(setup).await;
        for id in ["old", "b", "c"] {
            conversation(&store, id, "chat", &["u", "x"]).await;
        }
        for seq in 1..=4 {
            send_at(&app, &store, "old", seq, 1_000 + seq, "x", &["u", "x"]).await;
        }
        send_at(&app, &store, "b", 1, 2_000, "x", &["u", "x"]).await;
        send_at(&app, &store, "c", 1, 3_000, "x", &["u", "x"]).await;
        assert_eq!(crate::support::ids(&app.whole_list("acme", "u", 10).await), ["c"], "{kind:?}");

        let read = app.mark_read("acme", "u", "old", 1).await;
        assert_eq!(read.status, 200, "{kind:?}: {:?}", read.body);
        assert_eq!((&read.body["read_seq"], &read.body["unread"]), (&json!(1), &json!(3)), "{kind:?}: {:?}", read.body);
        assert_eq!(read.body["badge"]["total"], 1, "{kind:?}: only c is listed: {:?}", read.body);

        let muted = app.flag("acme", "u", "old", "mute", json!({"muted": true})).await;
        assert_eq!(muted.status, 200, "{kind:?}: {:?}", muted.body);
        let row = &muted.body["conversation"];
        assert_eq!(
            (&row["muted"], &row["unread"], &row["read_seq"]),
            (&json!(true), &json!(3), &json!(1)),
            "{kind:?}: {row}"
        );

        let marked = app.flag("acme", "u", "old", "mark-unread", json!({})).await;
        assert_eq!(marked.status, 200, "{kind:?}: {:?}", marked.body);
        let row = &marked.body["conversation"];
        assert_eq!(
            (&row["marked_unread"], &row["muted"], &row["unread"]),
            (&json!(true), &json!(true), &json!(3)),
            "{kind:?}: {row}"
        );
        assert_eq!(marked.body["badge"]["total"], 1, "{kind:?}: {:?}", marked.body);

        let stranger = app.flag("acme", "u", "nobodys", "mute", json!({"muted": true})).await;
        assert_eq!(stranger.status, 404, "{kind:?}: {:?}", stranger.body);
        drop(app);
        store.drop_database().await;
    }
}

/// A row of the app's views unread cannot read (here a negative time) is
/// left out of the truth, and its user is taken as one the truth cannot
/// give whole: a rewrite from it does not make that conversation's next
/// message count from a read cursor of 0 (the message goes to the truth,
/// whose row it made readable again).
#[tokio::test]
async fn a_conversation_the_views_cannot_give_is_never_counted_from_zero() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        conversation(&store, "c2", "chat", &["u1", "u2"]).await;
        send(&app, &store, "c1", 1, "u1", &["u1", "u2"]).await;
        for seq in 1..=40 {
            send(&app, &store, "c2", seq, "u1", &["u1", "u2"]).await;
        }
        app.mark_read("acme", "u2", "c2", 40).await;
        store.exec("UPDATE app_conversations SET last_ts = -5 WHERE conversation = 'c2'", &[]).await;
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await;
        assert_eq!(report.status, 200, "{kind:?}: {:?}", report.body);
        send(&app, &store, "c2", 41, "u1", &["u1", "u2"]).await;
        // The message made the row readable again (the app's head moved on).
        let row = app.row("acme", "u2", "c2").await.expect("c2 listed");
        assert_eq!((&row["unread"], &row["read_seq"]), (&json!(1), &json!(40)), "{kind:?}: {row}");
        assert_eq!(app.badge("acme", "u2").await.body["total"], 2, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// The memberships view says who is in a conversation: a join skips a user
/// it does not have yet, with nothing written for them (a cursor in the
/// store while Redis, rebuilding them without the conversation, counts its
/// every earlier message at the next touch); the members it has join, and
/// once the app added the others, their join takes.
#[tokio::test]
async fn a_join_skips_a_member_the_app_has_not_added_yet() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        conversation(&store, "c0", "chat", &["u3", "u2"]).await;
        send(&app, &store, "c0", 1, "u2", &["u3", "u2"]).await;
        assert_eq!(app.list("acme", "u3", "").await.status, 200, "u3 is loaded");
        for seq in 1..=5 {
            send(&app, &store, "c1", seq, "u1", &["u1", "u2"]).await;
        }
        let before = app.redis.user_key_space("acme", "u3");
        let early = app.join("acme", "c1", 5, &["u2", "u3"]).await;
        assert_eq!(early.status, 200, "{kind:?}: {:?}", early.body);
        let cursors = store.cursors("acme").await;
        assert_eq!(cursors.get(&s2("u2", "c1")), Some(&5), "{kind:?}: u2 is a member and joined");
        assert_eq!(cursors.get(&s2("u3", "c1")), None, "{kind:?}: nothing for u3 in the store");
        assert_eq!(app.redis.user_key_space("acme", "u3"), before, "{kind:?}: nor in Redis");

        store.add_member("acme", "c1", "u3").await;
        let joined = app.join("acme", "c1", 5, &["u3"]).await;
        assert_eq!(joined.status, 200, "{kind:?}: {:?}", joined.body);
        send(&app, &store, "c1", 6, "u1", &["u1", "u2", "u3"]).await;
        let row = app.row("acme", "u3", "c1").await.expect("c1 listed for u3");
        assert_eq!((&row["unread"], &row["read_seq"]), (&json!(1), &json!(5)), "{kind:?}: {row}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u3"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// A user in more conversations than Redis keeps pins an older one while
/// messages of another of theirs come in. Redis cannot answer the pin (it
/// no longer holds that conversation): the truth answers, and the user's
/// Redis state must take the pin even when a message moved it meanwhile (a
/// rewrite guarded by the state's version is refused then). Redis lists the
/// pinned conversation first, with the badge, as the truth does: a
/// reconcile after each round finds nothing to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pin_beyond_what_redis_kept_reaches_redis_while_messages_come() {
    const ROUNDS: u64 = 12;
    const MESSAGES: u64 = 16;
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let variables = vec![("max_kept", "1".to_string())];
        let setup = Setup { sql_url: Some(store.url.clone()), max_conversations: 2, variables, ..Setup::default() };
        let app = std::sync::Arc::new(App::with(setup).await);
        let olds: Vec<String> = (0..ROUNDS).map(|round| format!("old{round}")).collect();
        for (n, id) in (0..).zip(&olds) {
            conversation(&store, id, "chat", &["u", "x"]).await;
            send_at(&app, &store, id, 1, 1_000 + n, "x", &["u", "x"]).await;
        }
        for (id, ts) in [("b", 2_000), ("c", 3_000)] {
            conversation(&store, id, "chat", &["u", "x"]).await;
            send_at(&app, &store, id, 1, ts, "x", &["u", "x"]).await;
        }
        let mut seq = 1;
        for (round, old) in olds.iter().enumerate() {
            // The messages are stored first, as the app does; their touches
            // then go with the pin, each moving the user's state.
            let mut touches = Vec::new();
            for _ in 0..MESSAGES {
                seq += 1;
                let touch = message("acme", "c", seq, 3_000 + seq, "x", &["u", "x"]);
                store.store_message("acme", "c", seq, 3_000 + seq, "x", &touch["preview"].to_string()).await;
                touches.push(touch);
            }
            let (pinner, pinned) = (app.clone(), old.clone());
            let pin =
                tokio::spawn(async move { pinner.flag("acme", "u", &pinned, "pin", json!({"pinned": true})).await });
            let mut calls = tokio::task::JoinSet::new();
            for touch in touches {
                let app = app.clone();
                calls.spawn(async move { app.touch(touch).await });
            }
            for answer in calls.join_all().await {
                assert_eq!(answer.status, 200, "{kind:?} round {round}: {:?}", answer.body);
            }
            let pin = pin.await.unwrap();
            assert_eq!(pin.status, 200, "{kind:?} round {round}: {:?}", pin.body);
            assert_eq!(pin.body["conversation"]["pinned"], true, "{kind:?} round {round}: {:?}", pin.body);
            assert_redis_lists_first(&app, Some(old), &format!("{kind:?} round {round}")).await;
            // Unpinned, it goes back beyond what Redis keeps.
            let unpinned = app.flag("acme", "u", old, "pin", json!({"pinned": false})).await;
            assert_eq!(unpinned.status, 200, "{kind:?} round {round}: {:?}", unpinned.body);
        }
        assert_redis_lists_first(&app, None, &format!("{kind:?} at the end")).await;
        drop(app);
        store.drop_database().await;
    }
}

/// The first row of u's list from Redis is `pinned` (none: no pinned row),
/// and a reconcile finds Redis as the truth. A user left unloaded (their
/// state kept moving through every attempt to settle it) is rebuilt by the
/// first list, and Redis answers the second.
async fn assert_redis_lists_first(app: &App, pinned: Option<&str>, context: &str) {
    let mut list = app.list("acme", "u", "").await.body;
    if list["source"] == "sql" {
        list = app.list("acme", "u", "").await.body;
    }
    assert_eq!(list["source"], "redis", "{context}");
    let first = &list["conversations"].as_array().unwrap()[0];
    match pinned {
        Some(pinned) => assert_eq!((&first["id"], &first["pinned"]), (&json!(pinned), &json!(true)), "{context}"),
        None => assert_eq!(first["pinned"], false, "{context}: {list}"),
    }
    let report = app.reconcile(json!({"tenant": "acme", "users": ["u"]})).await.body;
    assert_eq!(report["drifted"], 0, "{context}: {report}");
}
