//! Categories (chat, system notices, ...): each with its own lifecycle:
//! filtered lists and badges, and an operator clearing one category.

use serde_json::{Value, json};

use super::{badge_of, clear_category, flag, ids, messages, row};
use crate::store::{KINDS, MessageStore};
use crate::support::{App, Setup, assert_badge_consistent, assert_walked_every_user, jwt, message};

/// u2 and u3 get chat c1 (3 unread) and system notices n1 (2) and n2 (1).
async fn two_categories(app: &App) {
    messages(app, "c1", 1, 3, 1_000).await;
    for (conversation, count) in [("n1", 2), ("n2", 1)] {
        for seq in 1..=count {
            let mut touch = message("acme", conversation, seq, 2_000 + seq, "bot", &["u2", "u3"]);
            touch["category"] = json!("system");
            app.touch(touch).await;
        }
    }
}

#[tokio::test]
async fn clear_category_clears_exactly_that_category_after_a_dry_run() {
    let app = App::start().await;
    two_categories(&app).await;
    flag(&app, "u2", "c1", "mark-unread", json!({})).await;
    let before = app.redis.key_space();
    let dry =
        clear_category(&app, json!({"tenant": "acme", "user": "u2", "category": "system", "dry_run": true})).await;
    assert_eq!(dry.body, json!({"dry_run": true, "users": 1, "conversations": 2, "unread": 3, "next_cursor": null}));
    assert_eq!(app.redis.key_space(), before, "a dry run writes nothing");
    let done = clear_category(&app, json!({"tenant": "acme", "user": "u2", "category": "system"})).await;
    assert_eq!(done.body, json!({"dry_run": false, "users": 1, "conversations": 2, "unread": 3, "next_cursor": null}));
    assert_eq!(badge_of(&app, "u2", "").await["categories"], json!({"chat": 3}));
    let chat = row(&app.whole_list("acme", "u2", 20).await, "c1").clone();
    assert_eq!((chat["unread"].clone(), chat["marked_unread"].clone()), (json!(3), json!(true)), "chat is untouched");
    assert_eq!(badge_of(&app, "u3", "").await["total"], 6, "another user is untouched");
    let again = clear_category(&app, json!({"tenant": "acme", "user": "u2", "category": "system"})).await;
    assert_eq!(again.body["conversations"], 0);
    assert_badge_consistent(&app, "acme", "u2").await;
}

#[tokio::test]
async fn clear_category_walks_every_user_of_the_tenant_only() {
    let app = App::start().await;
    for user in 0..450 {
        let mut touch = message("acme", "n1", 1, 1_000, "bot", &[&format!("w{user:03}")]);
        touch["category"] = json!("system");
        app.touch(touch).await;
    }
    two_categories(&app).await;
    let mut other = message("beta", "n1", 1, 1_000, "bot", &["u2"]);
    other["category"] = json!("system");
    app.touch(other).await;
    let (mut users, mut unread, mut cursor, mut calls) = (0, 0, Value::Null, 0);
    loop {
        let answer =
            clear_category(&app, json!({"tenant": "acme", "category": "system", "all_users": true, "cursor": cursor}))
                .await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        users += answer.body["users"].as_u64().unwrap();
        unread += answer.body["unread"].as_u64().unwrap();
        calls += 1;
        cursor = answer.body["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!((users, unread), (452, 450 + 3 + 3));
    assert!(calls > 1, "the walk goes in batches");
    for user in ["u2", "u3", "w000", "w449"] {
        assert_eq!(badge_of(&app, user, "category=system").await["total"], 0, "{user}");
    }
    assert_eq!(badge_of(&app, "u2", "").await["total"], 3, "chat stays");
    let beta = app.send("GET", "/v1/badge", Some(jwt("beta", "u2")), None).await;
    assert_eq!(beta.body["total"], 1, "another tenant stays");
}

/// A walk over one Redis that restarts (with its data) between two of its
/// calls: the server hashes its keys anew, so the walk starts again rather
/// than go on from a place that means nothing there, and no user is passed
/// over.
#[tokio::test]
async fn a_walk_over_a_redis_restarted_with_its_data_passes_over_no_user() {
    let app = App::with(Setup::one_server()).await;
    let users: Vec<String> = (0..2_000).map(|n| format!("w{n:04}")).collect();
    for (at, group) in users.chunks(500).enumerate() {
        let named: Vec<&str> = group.iter().map(String::as_str).collect();
        let mut touch = message("acme", &format!("n{at}"), 1, 1_000, "bot", &named);
        touch["category"] = json!("system");
        assert_eq!(app.touch(touch).await.status, 200);
    }
    let (mut cursor, mut calls, mut restarted) = (Value::Null, 0, false);
    loop {
        let body = json!({"tenant": "acme", "category": "system", "all_users": true, "cursor": cursor});
        let answer = clear_category(&app, body).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        cursor = answer.body["next_cursor"].clone();
        calls += 1;
        if cursor.is_null() {
            break;
        }
        if !restarted {
            app.redis.restart_keeping_data();
            restarted = true;
        }
        assert!(calls < 100, "the walk never ended");
    }
    assert!(restarted, "the walk ended in one call");
    assert_walked_every_user(&app, &users).await;
}

#[tokio::test]
async fn clear_category_writes_the_truth_first() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        for (conversation, category) in [("c1", "chat"), ("n1", "system")] {
            store.create_conversation("acme", conversation, category, &["u2".to_string()]).await;
            for seq in 1..=2 {
                let mut touch = message("acme", conversation, seq, 1_000 + seq, "bot", &["u2"]);
                touch["category"] = json!(category);
                store.store_message("acme", conversation, seq, 1_000 + seq, "bot", &touch["preview"].to_string()).await;
                app.touch(touch).await;
            }
        }
        let cleared = clear_category(&app, json!({"tenant": "acme", "users": ["u2"], "category": "system"})).await;
        assert_eq!(cleared.body["unread"], 2, "{kind:?}: {:?}", cleared.body);
        let cursors = store.cursors("acme").await;
        assert_eq!(cursors.get(&("u2".to_string(), "n1".to_string())), Some(&2), "{kind:?}");
        assert_eq!(cursors.get(&("u2".to_string(), "c1".to_string())), None, "{kind:?}: chat has no cursor");
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        assert_eq!(badge_of(&app, "u2", "").await["categories"], json!({"chat": 2}), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// A user in more conversations than Redis and the truth's rows hold
/// (here one listed, one kept): a clear reaches the older ones too, in the
/// store, so that the next message there counts one, not the old backlog.
#[tokio::test]
async fn a_clear_reaches_the_conversations_only_the_store_holds() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let variables = vec![("max_kept", "1".to_string())];
        let setup = Setup { sql_url: Some(store.url.clone()), max_conversations: 1, variables, ..Setup::default() };
        let app = App::with(setup).await;
        let send = |conversation: &'static str, seq: u64, ts: u64| {
            let (app, store) = (&app, &store);
            async move {
                let mut touch = message("acme", conversation, seq, ts, "bot", &["u2"]);
                touch["category"] = json!("system");
                store.store_message("acme", conversation, seq, ts, "bot", &touch["preview"].to_string()).await;
                assert_eq!(app.touch(touch).await.status, 200);
            }
        };
        for conversation in ["old", "b", "c"] {
            store.create_conversation("acme", conversation, "system", &["u2".to_string()]).await;
        }
        for seq in 1..=3 {
            send("old", seq, 1_000 + seq).await;
        }
        send("b", 1, 2_000).await;
        send("c", 1, 3_000).await;

        let request = json!({"tenant": "acme", "users": ["u2"], "category": "system"});
        let mut dry_run = request.clone();
        dry_run["dry_run"] = json!(true);
        let dry = clear_category(&app, dry_run).await.body;
        assert_eq!((&dry["conversations"], &dry["unread"]), (&json!(3), &json!(5)), "{kind:?}: {dry}");
        let cleared = clear_category(&app, request).await.body;
        assert_eq!((&cleared["conversations"], &cleared["unread"]), (&json!(3), &json!(5)), "{kind:?}: {cleared}");
        let cursors = store.cursors("acme").await;
        assert_eq!(cursors.get(&("u2".to_string(), "old".to_string())), Some(&3), "{kind:?}");

        send("old", 4, 4_000).await;
        let row = app.row("acme", "u2", "old").await.expect("old is listed again");
        assert_eq!((&row["unread"], &row["read_seq"]), (&json!(1), &json!(3)), "{kind:?}: {row}");
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test]
async fn list_and_badge_filter_by_category() {
    let app = App::start().await;
    two_categories(&app).await;
    let system = app.list("acme", "u2", "category=system&limit=1").await;
    assert_eq!(ids(system.body["conversations"].as_array().unwrap()), ["n1"]);
    assert_eq!(system.body["badge"]["total"], 6, "the page's badge is the whole badge");
    let mut rows = Vec::new();
    let mut query = "category=system&limit=1".to_string();
    loop {
        let page = app.list("acme", "u2", &query).await.body;
        rows.extend(page["conversations"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("category=system&limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(ids(&rows), ["n1", "n2"]);
    assert_eq!(
        ids(app.list("acme", "u2", "category=trade").await.body["conversations"].as_array().unwrap()),
        Vec::<&str>::new()
    );
    assert_eq!(
        badge_of(&app, "u2", "category=system").await,
        json!({"total": 3, "muted": 0, "mentions": 0, "categories": {"system": 3}, "source": "redis", "degraded": false})
    );
    assert_eq!(badge_of(&app, "u2", "category=trade").await["total"], 0);
}
