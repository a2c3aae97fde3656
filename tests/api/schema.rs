//! The worked SQL integration of `docs/schema/`: a small chat app's own
//! tables (message times as TIMESTAMPTZ / DATETIME, bodies as JSONB / JSON,
//! recalls as a column) with the two views written over them, built exactly
//! as the documentation gives them. unread's answers from SQL, its rebuild
//! after Redis lost everything and its reconcile all agree with what the app
//! stored, recalls included.

use serde_json::{Value, json};

use crate::store::{KINDS, Kind, MessageStore, P, s};
use crate::support::{App, SERVICE_TOKEN, Setup, jwt};

/// The statements of a documented schema file (comments dropped).
fn documented_schema(kind: Kind) -> Vec<String> {
    let file = match kind {
        Kind::MariaDb => "mysql.sql",
        Kind::Postgres => "postgres.sql",
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let code: String = text.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
    code.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// 2025-11-30 00:00:00 UTC in milliseconds.
const DAY: u64 = 1_764_460_800_000;

/// The app's side of a message: the row (a UTC time literal both servers
/// read), the conversation's last seq in the same transaction, then touch.
async fn post(app: &App, store: &MessageStore, kind: Kind, conversation: &str, seq: u64, members: &[&str]) -> u64 {
    let (ts, body) = commit(store, kind, conversation, seq).await;
    let category = store
        .rows(
            "SELECT category FROM app_conversations WHERE tenant = ? AND conversation = ?",
            &[s("acme"), s(conversation)],
        )
        .await;
    let touch = json!({"tenant": "acme", "conversation": conversation, "seq": seq, "ts": ts, "sender": "u1",
        "members": members, "category": category[0][0], "preview": body});
    let answer = app.touch(touch).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    ts
}

/// The app's transaction for message `seq` of u1: the row and the
/// conversation's last seq. Its time (ms) and body.
async fn commit(store: &MessageStore, kind: Kind, conversation: &str, seq: u64) -> (u64, Value) {
    let ts = DAY + seq * 1_000 + 123;
    let at = format!("2025-11-30 00:00:{:02}.123{}", seq, if kind == Kind::Postgres { "+00" } else { "" });
    let body = json!({"type": "text", "text": format!("message {seq}")});
    // Text parameters, converted by the server as the app's driver would send them typed.
    let insert = match kind {
        Kind::Postgres => {
            "INSERT INTO app_messages (tenant, conversation, seq, sender, sent_at, body) \
             VALUES (?, ?, ?, ?, CAST(CAST(? AS TEXT) AS TIMESTAMPTZ), CAST(CAST(? AS TEXT) AS JSONB))"
        }
        Kind::MariaDb => {
            "INSERT INTO app_messages (tenant, conversation, seq, sender, sent_at, body) VALUES (?, ?, ?, ?, ?, ?)"
        }
    };
    let params = [s("acme"), s(conversation), P::I(seq as i64), s("u1"), s(&at), s(&body.to_string())];
    store.exec(insert, &params).await;
    store
        .exec(
            "UPDATE app_conversations SET last_seq = ? WHERE tenant = ? AND conversation = ?",
            &[P::I(seq as i64), s("acme"), s(conversation)],
        )
        .await;
    (ts, body)
}

async fn conversation(store: &MessageStore, id: &str, category: &str, members: &[&str]) {
    store
        .exec(
            "INSERT INTO app_conversations (tenant, conversation, category) VALUES (?, ?, ?)",
            &[s("acme"), s(id), s(category)],
        )
        .await;
    for member in members {
        store
            .exec(
                "INSERT INTO app_members (tenant, conversation, user_id) VALUES (?, ?, ?)",
                &[s("acme"), s(id), s(member)],
            )
            .await;
    }
}

#[tokio::test]
async fn the_documented_schema_is_the_truth_unread_answers_from() {
    for kind in KINDS {
        let store = MessageStore::create_with(kind, &documented_schema(kind)).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        conversation(&store, "n1", "system", &["u1", "u2"]).await;
        for seq in 1..=3 {
            post(&app, &store, kind, "c1", seq, &["u1", "u2"]).await;
        }
        let last_ts = post(&app, &store, kind, "n1", 1, &["u1", "u2"]).await;
        app.mark_read("acme", "u2", "c1", 1).await;

        // The app recalls c1's last message: its view shows the recall.
        store
            .exec(
                "UPDATE app_messages SET recalled_at = sent_at WHERE tenant = ? AND conversation = ? AND seq = ?",
                &[s("acme"), s("c1"), P::I(3)],
            )
            .await;
        let recall = json!({"tenant": "acme", "conversation": "c1", "seq": 3, "members": ["u1", "u2"],
            "preview": {"type": "recalled"}});
        let answer = app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.into()), Some(recall.to_string())).await;
        assert_eq!(answer.status, 200, "{kind:?}: {:?}", answer.body);

        let from_redis = app.list("acme", "u2", "").await.body;
        assert_eq!(from_redis["source"], "redis", "{kind:?}");
        let rows: &Vec<Value> = from_redis["conversations"].as_array().unwrap();
        let c1 = rows.iter().find(|r| r["id"] == "c1").unwrap();
        assert_eq!((c1["unread"].as_u64(), &c1["preview"]), (Some(1), &json!({"type": "recalled"})), "{kind:?}");
        let n1 = rows.iter().find(|r| r["id"] == "n1").unwrap();
        assert_eq!((n1["category"].as_str(), n1["ts"].as_u64()), (Some("system"), Some(last_ts)), "{kind:?}");

        // Nothing drifted, and Redis rebuilt from these views answers the same.
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        app.redis.flush_all();
        let from_sql = app.list("acme", "u2", "").await.body;
        assert_eq!(from_sql["source"], "sql", "{kind:?}");
        assert_eq!(from_sql["conversations"], from_redis["conversations"], "{kind:?}");
        assert_eq!(from_sql["badge"], from_redis["badge"], "{kind:?}");
        let badge = app.send("GET", "/v1/badge", Some(jwt("acme", "u2")), None).await.body;
        assert_eq!(
            badge,
            json!({"total": 2, "muted": 0, "mentions": 0, "categories": {"chat": 1, "system": 1},
                "source": "redis", "degraded": false}),
            "{kind:?}"
        );
        drop(app);
        store.drop_database().await;
    }
}

/// unread's own MySQL tables made when identifiers were at most 64 bytes are
/// widened on the first connection; a 128-byte user id then works end to end.
#[tokio::test]
async fn tables_made_for_short_identifiers_are_widened_for_long_ones() {
    let mut schema: Vec<String> = crate::store::APP_SCHEMA.iter().map(|s| s.to_string()).collect();
    schema.push(
        "CREATE TABLE unread_read_cursors (tenant VARBINARY(64) NOT NULL, user_id VARBINARY(64) NOT NULL, \
         conversation VARBINARY(64) NOT NULL, read_seq BIGINT NOT NULL DEFAULT 0, muted SMALLINT NOT NULL DEFAULT 0, \
         pinned SMALLINT NOT NULL DEFAULT 0, marked_unread SMALLINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL, \
         PRIMARY KEY (tenant, user_id, conversation))"
            .into(),
    );
    schema.push(
        "CREATE TABLE unread_mentions (tenant VARBINARY(64) NOT NULL, conversation VARBINARY(64) NOT NULL, \
         seq BIGINT NOT NULL, user_id VARBINARY(64) NOT NULL, sender VARBINARY(64) NOT NULL, \
         PRIMARY KEY (tenant, conversation, seq, user_id))"
            .into(),
    );
    let store = MessageStore::create_with(Kind::MariaDb, &schema).await;
    store.exec("INSERT INTO unread_read_cursors VALUES ('acme', 'old', 'c0', 3, 0, 0, 0, 1)", &[]).await;
    let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
    let long = format!("{}@example.com", "ü".repeat(58)); // 128 bytes
    assert_eq!(long.len(), 128);
    let members = vec!["bob@example.com".to_string(), long.clone()];
    store.create_conversation("acme", "#general", "chat", &members).await;
    for seq in 1..=2 {
        store.store_message("acme", "#general", seq, 1_000 * seq, "bob@example.com", "{}").await;
        let mut touch = crate::support::message("acme", "#general", seq, 1_000 * seq, "bob@example.com", &[&long]);
        touch["mentions"] = json!([long]);
        let answer = app.send("POST", "/v1/touch", Some(SERVICE_TOKEN.into()), Some(touch.to_string())).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    let read = json!({"conversation": "#general", "seq": 1}).to_string();
    let answer = app.send("POST", "/v1/mark-read", Some(jwt("acme", &long)), Some(read)).await;
    assert_eq!((answer.status, &answer.body["unread"]), (200, &json!(1)), "{:?}", answer.body);
    assert_eq!(store.cursors("acme").await.get(&(long.clone(), "#general".to_string())), Some(&1));
    assert_eq!(store.cursors("acme").await.get(&("old".to_string(), "c0".to_string())), Some(&3), "rows kept");
    let narrow = store
        .rows(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME LIKE 'unread%' AND DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH < 128",
            &[],
        )
        .await;
    assert_eq!(narrow, vec![vec!["0".to_string()]]);
    // From SQL alone (Redis lost everything), the same numbers.
    app.redis.flush_all();
    let badge = app.badge("acme", &long).await;
    assert_eq!((&badge.body["total"], &badge.body["mentions"]), (&json!(1), &json!(1)), "{:?}", badge.body);
}

/// With the heads view's `last_sender`, the truth never counts a message
/// for its own sender, even when its touch (which moves the sender's
/// cursor) never came.
#[tokio::test]
async fn the_last_sender_never_counts_their_own_message() {
    for kind in KINDS {
        let store = MessageStore::create_with(kind, &documented_schema(kind)).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        conversation(&store, "c1", "chat", &["u1", "u2"]).await;
        post(&app, &store, kind, "c1", 1, &["u1", "u2"]).await;
        commit(&store, kind, "c1", 2).await; // its touch never comes
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2"]})).await;
        assert_eq!(report.status, 200, "{kind:?}: {:?}", report.body);
        for (user, unread) in [("u1", 0), ("u2", 2)] {
            let list = app.list("acme", user, "").await;
            assert_eq!(list.body["conversations"][0]["unread"], unread, "{kind:?} {user}: {:?}", list.body);
            assert_eq!(list.body["badge"]["total"], unread, "{kind:?} {user}");
        }
        app.redis.flush_all();
        assert_eq!(app.badge("acme", "u1").await.body["total"], 0, "{kind:?}: rebuilt from SQL");
        store.drop_database().await;
    }
}

/// unread's ids are exact bytes, whatever collation the app's views compare
/// with (MySQL's default ignores case): from the documented schema, a user's
/// answers rebuilt from SQL hold neither the conversations of a user whose id
/// differs only in case nor those of such a tenant, a message by such a user
/// is not the reader's own, and conversations of the same moment are cut
/// from a full list as Redis cuts them (by id, byte by byte), so the two
/// stores answer alike.
#[tokio::test]
async fn ids_that_differ_only_in_case_stay_apart_in_the_truth() {
    for kind in KINDS {
        let store = MessageStore::create_with(kind, &documented_schema(kind)).await;
        let setup = Setup { sql_url: Some(store.url.clone()), max_conversations: 1, ..Setup::default() };
        let app = App::with(setup).await;
        // (tenant, conversation, members, sender, messages), every message at the same moment.
        let conversations: [(&str, &str, [&str; 2], &str, u64); 6] = [
            ("acme", "c1", ["u1", "bob"], "u1", 1),
            ("acme", "c2", ["u1", "Bob"], "u1", 2),
            ("ACME", "c3", ["u1", "bob"], "u1", 3),
            ("acme", "c4", ["u1", "carol"], "Carol", 1), // not carol's own message
            ("acme", "a", ["u1", "u9"], "u1", 1),
            ("acme", "B", ["u1", "u9"], "u1", 1),
        ];
        for (tenant, id, members, sender, messages) in conversations {
            let params = [s(tenant), s(id)];
            store.exec("INSERT INTO app_conversations (tenant, conversation) VALUES (?, ?)", &params).await;
            for member in members {
                let params = [s(tenant), s(id), s(member)];
                store.exec("INSERT INTO app_members (tenant, conversation, user_id) VALUES (?, ?, ?)", &params).await;
            }
            for seq in 1..=messages {
                let touch = crate::support::message(tenant, id, seq, DAY + 123, sender, &members);
                let (at, body) = (format!("2025-11-30 00:00:00.123{}", beyond_ms(kind)), touch["preview"].to_string());
                let insert = match kind {
                    Kind::Postgres => {
                        "INSERT INTO app_messages (tenant, conversation, seq, sender, sent_at, body) \
                         VALUES (?, ?, ?, ?, CAST(CAST(? AS TEXT) AS TIMESTAMPTZ), CAST(CAST(? AS TEXT) AS JSONB))"
                    }
                    Kind::MariaDb => {
                        "INSERT INTO app_messages (tenant, conversation, seq, sender, sent_at, body) \
                         VALUES (?, ?, ?, ?, ?, ?)"
                    }
                };
                store.exec(insert, &[s(tenant), s(id), P::I(seq as i64), s(sender), s(&at), s(&body)]).await;
                let update = "UPDATE app_conversations SET last_seq = ? WHERE tenant = ? AND conversation = ?";
                store.exec(update, &[P::I(seq as i64), s(tenant), s(id)]).await;
                let answer = app.touch(touch).await;
                assert_eq!(answer.status, 200, "{kind:?}: {:?}", answer.body);
            }
        }
        let readers =
            [("acme", "bob", "c1", 1), ("acme", "Bob", "c2", 2), ("ACME", "bob", "c3", 3), ("acme", "carol", "c4", 1)];
        let mut from_redis = Vec::new();
        for (tenant, user, only, unread) in readers {
            let list = app.list(tenant, user, "").await.body;
            assert_eq!(list["source"], "redis", "{kind:?}");
            let rows = list["conversations"].as_array().unwrap();
            assert_eq!(crate::support::ids(rows), [only], "{kind:?} {tenant}/{user}: {list}");
            assert_eq!((&rows[0]["unread"], &list["badge"]["total"]), (&json!(unread), &json!(unread)), "{kind:?}");
            from_redis.push(list);
        }
        // a and B came at the same moment: the list of one keeps what Redis keeps.
        let tied = app.list("acme", "u9", "").await.body;
        assert_eq!(tied["conversations"].as_array().map(Vec::len), Some(1), "{kind:?}: {tied}");
        from_redis.push(tied);

        for (tenant, users) in [("acme", json!(["bob", "Bob", "carol", "u9"])), ("ACME", json!(["bob"]))] {
            let report = app.reconcile(json!({"tenant": tenant, "users": users})).await.body;
            assert_eq!(report["drifted"], 0, "{kind:?} {tenant}: {report}");
        }
        app.redis.flush_all();
        let users = [("acme", "bob"), ("acme", "Bob"), ("ACME", "bob"), ("acme", "carol"), ("acme", "u9")];
        for ((tenant, user), redis) in users.into_iter().zip(&from_redis) {
            let from_sql = app.list(tenant, user, "").await.body;
            assert_eq!(from_sql["source"], "sql", "{kind:?}");
            assert_eq!(from_sql["conversations"], redis["conversations"], "{kind:?} {tenant}/{user}");
            assert_eq!(from_sql["badge"], redis["badge"], "{kind:?} {tenant}/{user}");
        }
        drop(app);
        store.drop_database().await;
    }
}

/// How a time literal goes on after its milliseconds: PostgreSQL's
/// TIMESTAMPTZ keeps microseconds (which the heads view drops, as an app
/// sending whole milliseconds does) and takes the zone; MariaDB's
/// DATETIME(3) holds milliseconds in UTC.
fn beyond_ms(kind: Kind) -> &'static str {
    if kind == Kind::Postgres { "789+00" } else { "" }
}
