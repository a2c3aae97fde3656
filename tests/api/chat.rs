//! What users of chat apps expect (issue 4): mute, mentions, pins, mark
//! unread, recall, categories with their own lifecycle, filters, lock-screen
//! previews and change events — through the components, on real Redis.

use serde_json::{Value, json};

use crate::store::{KINDS, MessageStore};
use crate::support::{ADMIN_TOKEN, Answer, App, Events, SERVICE_TOKEN, Setup, assert_badge_consistent, jwt, message};

async fn flag(app: &App, user: &str, conversation: &str, action: &str, body: Value) -> Answer {
    let path = format!("/v1/conversations/{conversation}/{action}");
    app.send("POST", &path, Some(jwt("acme", user)), Some(body.to_string())).await
}

async fn recall(app: &App, conversation: &str, seq: u64, members: &[&str]) -> Answer {
    let body = json!({"tenant": "acme", "conversation": conversation, "seq": seq, "members": members});
    app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
}

async fn clear_category(app: &App, body: Value) -> Answer {
    app.send("POST", "/v1/admin/clear-category", Some(ADMIN_TOKEN.to_string()), Some(body.to_string())).await
}

async fn badge_of(app: &App, user: &str, query: &str) -> Value {
    let answer = app.send("GET", &format!("/v1/badge?{query}"), Some(jwt("acme", user)), None).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    answer.body
}

/// `count` messages from u1 to u1 and u2 in `conversation`, seqs from `first`.
async fn messages(app: &App, conversation: &str, first: u64, count: u64, ts: u64) {
    for seq in first..first + count {
        let touch = message("acme", conversation, seq, ts + seq, "u1", &["u1", "u2", "u3"]);
        assert_eq!(app.touch(touch).await.status, 200);
    }
}

fn row<'a>(rows: &'a [Value], id: &str) -> &'a Value {
    rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no {id} in {rows:?}"))
}

fn ids(rows: &[Value]) -> Vec<&str> {
    rows.iter().map(|r| r["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_muted_conversation_keeps_its_unread_but_leaves_the_badge_total() {
    let app = App::start().await;
    messages(&app, "c1", 1, 3, 1_000).await;
    messages(&app, "c2", 1, 2, 2_000).await;
    let muted = flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
    assert_eq!(muted.status, 200, "{:?}", muted.body);
    assert_eq!(
        (muted.body["conversation"]["muted"].clone(), muted.body["conversation"]["unread"].clone()),
        (json!(true), json!(3))
    );
    assert_eq!(muted.body["badge"], json!({"total": 2, "muted": 3, "mentions": 0, "categories": {"chat": 2}}));
    assert_eq!(
        flag(&app, "u2", "c1", "mute", json!({"muted": true})).await.body,
        muted.body,
        "muting again changes nothing"
    );
    let rows = app.whole_list("acme", "u2", 20).await;
    assert_eq!((row(&rows, "c1")["unread"].clone(), row(&rows, "c1")["muted"].clone()), (json!(3), json!(true)));
    messages(&app, "c1", 4, 1, 1_000).await;
    assert_eq!(
        badge_of(&app, "u2", "").await,
        json!({"total": 2, "muted": 4, "mentions": 0, "categories": {"chat": 2}, "degraded": false})
    );
    assert_eq!(badge_of(&app, "u3", "").await["total"], 6, "another member's mute is not u3's");
    let unmuted = flag(&app, "u2", "c1", "mute", json!({"muted": false})).await;
    assert_eq!(unmuted.body["badge"], json!({"total": 6, "muted": 0, "mentions": 0, "categories": {"chat": 6}}));
    assert_badge_consistent(&app, "acme", "u2").await;
}

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
        json!({"total": 0, "muted": 2, "mentions": 1, "categories": {}, "degraded": false})
    );
    assert_eq!(app.mark_read("acme", "u2", "c1", 4).await.body["badge"]["mentions"], 0);
}

#[tokio::test]
async fn pinned_conversations_come_first_newest_first_and_are_capped() {
    let app = App::start().await;
    for (i, conversation) in ["c1", "c2", "c3", "c4", "c5", "c6", "c7"].iter().enumerate() {
        messages(&app, conversation, 1, 1, 1_000 * (i as u64 + 1)).await;
    }
    for conversation in ["c1", "c3"] {
        assert_eq!(
            flag(&app, "u2", conversation, "pin", json!({"pinned": true})).await.body["conversation"]["pinned"],
            true
        );
    }
    let expected = ["c3", "c1", "c7", "c6", "c5", "c4", "c2"];
    for page_size in [1, 2, 3, 20] {
        assert_eq!(ids(&app.whole_list("acme", "u2", page_size).await), expected, "page size {page_size}");
    }
    assert_eq!(ids(&app.whole_list("acme", "u3", 20).await)[0], "c7", "pins are per user");
    messages(&app, "c1", 2, 1, 9_000).await;
    assert_eq!(ids(&app.whole_list("acme", "u2", 2).await)[..3], ["c1", "c3", "c7"]);
    for conversation in ["c4", "c5", "c6"] {
        assert_eq!(flag(&app, "u2", conversation, "pin", json!({"pinned": true})).await.status, 200);
    }
    let sixth = flag(&app, "u2", "c7", "pin", json!({"pinned": true})).await;
    assert_eq!((sixth.status, sixth.body["error"]["code"].as_str()), (409, Some("too_many_pins")));
    assert_eq!(
        flag(&app, "u2", "c3", "pin", json!({"pinned": true})).await.status,
        200,
        "pinning a pinned one again is fine"
    );
    assert_eq!(flag(&app, "u2", "c3", "pin", json!({"pinned": false})).await.body["conversation"]["pinned"], false);
    assert_eq!(flag(&app, "u2", "c7", "pin", json!({"pinned": true})).await.status, 200);
    assert_eq!(ids(&app.whole_list("acme", "u2", 3).await), ["c1", "c7", "c6", "c5", "c4", "c3", "c2"]);
}

#[tokio::test]
async fn a_pinned_conversation_is_never_trimmed() {
    let app = App::with(Setup { max_conversations: 3, ..Setup::default() }).await;
    messages(&app, "old", 1, 1, 1_000).await;
    flag(&app, "u2", "old", "pin", json!({"pinned": true})).await;
    for (i, conversation) in ["c1", "c2", "c3"].iter().enumerate() {
        messages(&app, conversation, 1, 1, 2_000 + i as u64).await;
    }
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["old", "c3", "c2"]);
    assert_eq!(ids(&app.whole_list("acme", "u3", 20).await), ["c3", "c2", "c1"]);
    assert_badge_consistent(&app, "acme", "u2").await;
}

#[tokio::test]
async fn mark_unread_counts_one_until_the_next_mark_read() {
    let app = App::start().await;
    messages(&app, "c1", 1, 2, 1_000).await;
    messages(&app, "c2", 1, 3, 2_000).await;
    app.mark_read("acme", "u2", "c1", 2).await;
    let marked = flag(&app, "u2", "c1", "mark-unread", json!({})).await;
    assert_eq!(marked.status, 200, "{:?}", marked.body);
    assert_eq!(
        (marked.body["conversation"]["marked_unread"].clone(), marked.body["conversation"]["unread"].clone()),
        (json!(true), json!(0))
    );
    assert_eq!(marked.body["badge"]["total"], 4);
    let empty_body = app.send("POST", "/v1/conversations/c2/mark-unread", Some(jwt("acme", "u2")), None).await;
    assert_eq!(empty_body.body["badge"]["total"], 4, "a conversation with unread messages counts them, not one more");
    flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
    assert_eq!(badge_of(&app, "u2", "").await["total"], 3, "a muted mark counts nothing");
    flag(&app, "u2", "c1", "mute", json!({"muted": false})).await;
    let read = app.mark_read("acme", "u2", "c1", 1).await;
    assert_eq!(read.body["badge"]["total"], 3, "mark-read clears the mark even below the cursor");
    assert_eq!(row(&app.whole_list("acme", "u2", 20).await, "c1")["marked_unread"], false);
    let unknown = flag(&app, "u2", "nope", "mark-unread", json!({})).await;
    assert_eq!((unknown.status, unknown.body["error"]["code"].as_str()), (404, Some("unknown_conversation")));
    assert_badge_consistent(&app, "acme", "u2").await;
}

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
        json!({"total": 0, "muted": 0, "mentions": 0, "categories": {}, "degraded": false})
    );
}

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
        json!({"total": 3, "muted": 0, "mentions": 0, "categories": {"system": 3}, "degraded": false})
    );
    assert_eq!(badge_of(&app, "u2", "category=trade").await["total"], 0);
}

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
    // u3 joins at seq 2: both messages count for it.
    assert_eq!(unread, [("u2".into(), 1), ("u3".into(), 2), ("u2".into(), 0), ("u3".into(), 1)]);
    app.delete_conversation("acme", "c1", &["u1", "u2", "u3"]).await;
    assert_eq!(
        events.take(),
        [json!({"user": "u3", "conversation": "c1", "unread": 0, "mentions": 0,
        "badge": {"total": 0, "muted": 0, "mentions": 0}})],
        "only u3 had something unread in it"
    );
}

#[tokio::test]
async fn flags_mentions_and_recalls_are_in_the_truth() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
        for seq in 1..=3 {
            let mut touch = message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"]);
            touch["mentions"] = json!(["u2"]);
            store.store_message("acme", "c1", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            app.touch(touch).await;
        }
        recall(&app, "c1", 3, &["u1", "u2"]).await;
        let muted = flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
        assert_eq!(muted.status, 200, "{kind:?}: {:?}", muted.body);
        assert_eq!(flag(&app, "u2", "c1", "pin", json!({"pinned": true})).await.status, 200, "{kind:?}");
        let before = app.whole_list("acme", "u2", 20).await;
        assert_eq!((before[0]["unread"].clone(), before[0]["mentions"].clone()), (json!(2), json!(2)), "{kind:?}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        assert_eq!(app.whole_list("acme", "u2", 20).await, before, "{kind:?}");
        app.redis.kill();
        app.redis.restart();
        assert_eq!(app.list("acme", "u2", "").await.body["degraded"], true, "{kind:?}: Redis lost everything");
        assert_eq!(app.whole_list("acme", "u2", 20).await, before, "{kind:?}: rebuilt from the truth");
        assert_eq!(
            badge_of(&app, "u2", "").await,
            json!({"total": 0, "muted": 2, "mentions": 2, "categories": {}, "degraded": false})
        );
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test]
async fn a_late_touch_of_a_deleted_conversation_changes_nothing() {
    let app = App::start().await;
    messages(&app, "c1", 1, 2, 1_000).await;
    messages(&app, "c2", 1, 1, 2_000).await;
    let held_back = message("acme", "c1", 3, 1_003, "u1", &["u1", "u2", "u3"]);
    assert_eq!(app.delete_conversation("acme", "c1", &["u1", "u2", "u3"]).await.body["removed"], 3);
    let before = app.redis.user_key_space("acme", "u2");
    assert_eq!(app.touch(held_back).await.body["applied"], false);
    assert_eq!(app.redis.user_key_space("acme", "u2"), before);
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["c2"]);
    assert_badge_consistent(&app, "acme", "u2").await;
}

async fn join(app: &App, conversation: &str, seq: u64, members: &[&str]) -> Answer {
    let body = json!({"tenant": "acme", "conversation": conversation, "seq": seq, "members": members});
    app.send("POST", "/v1/join", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
}

#[tokio::test]
async fn a_member_who_joins_late_counts_only_what_came_after() {
    let app = App::start().await;
    messages(&app, "c1", 1, 5, 1_000).await;
    assert_eq!(join(&app, "c1", 5, &["u9"]).await.body, json!({"conversation": "c1", "seq": 5, "changed": 1}));
    let mut touch = message("acme", "c1", 6, 1_006, "u1", &["u1", "u2", "u9"]);
    touch["mentions"] = json!(["u9"]);
    app.touch(touch).await;
    let rows = app.whole_list("acme", "u9", 20).await;
    assert_eq!(
        (rows[0]["unread"].clone(), rows[0]["read_seq"].clone(), rows[0]["mentions"].clone()),
        (json!(1), json!(5), json!(1))
    );
    // Told after its first touch, or twice: the same.
    assert_eq!(join(&app, "c1", 4, &["u2"]).await.body["changed"], 1);
    assert_eq!(join(&app, "c1", 4, &["u2"]).await.body["changed"], 0);
    assert_eq!(row(&app.whole_list("acme", "u2", 20).await, "c1")["unread"], 2);
    assert_badge_consistent(&app, "acme", "u9").await;
}

#[tokio::test]
async fn a_late_join_is_in_the_truth() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u9".to_string()]).await;
        for seq in 1..=4 {
            let touch = message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u9"]);
            store.store_message("acme", "c1", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            if seq == 4 {
                assert_eq!(join(&app, "c1", 3, &["u9"]).await.status, 200, "{kind:?}");
            }
            app.touch(touch).await;
        }
        assert_eq!(store.cursors("acme").await.get(&("u9".to_string(), "c1".to_string())), Some(&3), "{kind:?}");
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        assert_eq!(badge_of(&app, "u9", "").await["total"], 1, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}
