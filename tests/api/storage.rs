//! No caller can grow storage without bound: an authenticated user (or a
//! service caller) flooding the API with conversation ids it does not have
//! adds no SQL rows, and in Redis at most what is bounded per user.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::store::{KINDS, MessageStore};
use crate::support::{App, Setup, message};

const CALLS: usize = 10_000;
const CLIENTS: usize = 16;
/// The attacker's list bound and, ten times that, the kept bound.
const MAX_CONVERSATIONS: u32 = 20;

/// 10 000 calls with random conversation ids: mark-read, mute, pin,
/// mark-unread as the user, leave and delete for random members.
async fn flood(app: &Arc<App>) {
    let workers: Vec<_> = (0..CLIENTS)
        .map(|worker| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(worker as u64);
                for _ in (worker..CALLS).step_by(CLIENTS) {
                    let id = format!("r{}", rng.random::<u64>());
                    let answer = match rng.random_range(0..6) {
                        0 | 1 => app.mark_read("acme", "mallory", &id, rng.random_range(1..1_000)).await,
                        2 => app.flag("acme", "mallory", &id, "mute", json!({"muted": true})).await,
                        3 => app.flag("acme", "mallory", &id, "pin", json!({"pinned": true})).await,
                        4 => app.flag("acme", "mallory", &id, "mark-unread", json!({})).await,
                        _ => {
                            let stranger = format!("s{}", rng.random::<u32>());
                            if rng.random_bool(0.5) {
                                app.leave("acme", &id, &[&stranger]).await
                            } else {
                                app.delete_conversation("acme", &id, &[&stranger]).await
                            }
                        }
                    };
                    assert!(matches!(answer.status, 200 | 404), "{} {:?}", answer.status, answer.body);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
}

/// What the user holds before the flood: one conversation.
async fn seed(app: &App, store: Option<&MessageStore>) {
    let touch = message("acme", "mine", 1, 1_000, "alice", &["alice", "mallory"]);
    if let Some(store) = store {
        store.create_conversation("acme", "mine", "chat", &["alice".to_string(), "mallory".to_string()]).await;
        store.store_message("acme", "mine", 1, 1_000, "alice", &touch["preview"].to_string()).await;
    }
    assert_eq!(app.touch(touch).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_unknown_conversations_adds_no_rows_and_bounded_keys() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = Arc::new(
            App::with(Setup {
                sql_url: Some(store.url.clone()),
                max_conversations: MAX_CONVERSATIONS,
                ..Setup::default()
            })
            .await,
        );
        seed(&app, Some(&store)).await;
        app.list("acme", "mallory", "").await;
        let rows = |table: &'static str| {
            let store = &store;
            async move { store.rows(&format!("SELECT COUNT(*) FROM {table}"), &[]).await[0][0].clone() }
        };
        let before = (rows("unread_read_cursors").await, rows("unread_mentions").await, app.redis.keys());
        flood(&app).await;
        let after = (rows("unread_read_cursors").await, rows("unread_mentions").await, app.redis.keys());
        assert_eq!(after, before, "{kind:?}: the flood added storage");
        assert_eq!(app.row("acme", "mallory", "mine").await.unwrap()["unread"], 1, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_sql_a_flood_keeps_only_a_bounded_number_of_early_cursors() {
    let app = Arc::new(App::with(Setup { max_conversations: MAX_CONVERSATIONS, ..Setup::default() }).await);
    seed(&app, None).await;
    flood(&app).await;
    let mut redis = app.redis.connection().unwrap();
    let keys = app.redis.keys();
    let mallory: Vec<&String> = keys.iter().filter(|k| k.contains("{acme:mallory}")).collect();
    let seeded = |k: &String| k.contains("{acme:alice}") || k == "un:v2:head:{acme:mine}";
    assert!(keys.iter().all(|k| k.contains("{acme:mallory}") || seeded(k)), "{keys:?}");
    assert!(mallory.len() <= 8, "{mallory:?}");
    let kept: u64 = redis::cmd("HLEN").arg("un:v2:{acme:mallory}:kept").query(&mut redis).unwrap();
    assert!(kept <= 10 * u64::from(MAX_CONVERSATIONS), "{kept} kept cursors");
    assert_eq!(app.row("acme", "mallory", "mine").await.unwrap()["unread"], 1);
}

/// A user left with nothing listed keeps its other keys for a while only.
#[tokio::test]
async fn a_user_with_nothing_listed_expires() {
    let app = App::start().await;
    app.mark_read("acme", "ghost", "somewhere", 3).await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    app.leave("acme", "c1", &["u2"]).await;
    for user in ["ghost", "u2"] {
        for key in app.redis.keys().iter().filter(|k| k.contains(&format!("{{acme:{user}}}"))) {
            let ttl: i64 = app.holder(key).command(&["TTL", key]);
            assert!(ttl > 0 && ttl <= 30 * 24 * 3600, "{key}: ttl {ttl}");
        }
    }
    // Listed again: kept for good.
    app.touch(message("acme", "c2", 1, 2_000, "u1", &["u1", "u2"])).await;
    for key in app.redis.keys().iter().filter(|k| k.contains("{acme:u2}")) {
        let ttl: i64 = app.holder(key).command(&["TTL", key]);
        assert_eq!(ttl, -1, "{key}");
    }
}

/// A head lives 90 days past its conversation's last message, and a list
/// page showing a row older than half that renews it, so that a listed
/// conversation keeps its preview however quiet it is. Newer rows' heads
/// have half their life or more left, and a page does not look at their
/// time to live: on a cluster it reads them with plain reads (and takes the
/// script for older rows), on one Redis the page's own script reads every
/// row's head and the time to live of only the older rows'.
#[tokio::test]
async fn a_list_page_renews_the_heads_of_rows_older_than_half_a_heads_life() {
    let app = App::start().await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    const DAY: u64 = 24 * 3600 * 1000;
    let ages = [1, 60, 400];
    for (i, age) in ages.iter().enumerate() {
        let mut body = message("acme", &format!("c{i}"), 1, now - age * DAY, "u1", &["u1", "me"]);
        body["preview"] = json!({"text": format!("in c{i}")});
        assert_eq!(app.touch(body).await.status, 200);
    }
    // As if most of every head's life had passed.
    let head = |i: usize| format!("un:v2:head:{{acme:c{i}}}");
    for i in 0..ages.len() {
        let _: i64 = app.holder(&head(i)).command(&["EXPIRE", &head(i), "1000"]);
    }
    let gets = || app.redis.commands_by_name().get("get").copied().unwrap_or(0);
    let ttls = || app.redis.commands_by_name().get("ttl").copied().unwrap_or(0);
    let ttls_before = ttls();
    let rows = app.whole_list("acme", "me", 10).await;
    assert_eq!(ttls() - ttls_before, 2, "the older rows' heads' times to live, not the day-old one's");
    let shown: Vec<(&str, &str)> =
        rows.iter().map(|row| (row["id"].as_str().unwrap(), row["preview"]["text"].as_str().unwrap())).collect();
    assert_eq!(shown, [("c0", "in c0"), ("c1", "in c1"), ("c2", "in c2")]);
    let ttl = |i: usize| -> i64 { app.holder(&head(i)).command(&["TTL", &head(i)]) };
    for i in [1, 2] {
        assert!(ttl(i) > 80 * 24 * 3600, "c{i}, {} days old: its head was renewed", ages[i]);
    }
    assert!(ttl(0) <= 1000, "a day-old row's head was only read");
    if app.cluster.is_some() {
        // Again, every script loaded: the page's script and one per older
        // row (its own slot), and one GET per row (a script's count too).
        let scripts = || app.redis.command_stats().get("evalsha").map_or(0, |(calls, _)| *calls);
        let (gets_before, scripts_before) = (gets(), scripts());
        assert_eq!(app.whole_list("acme", "me", 10).await.len(), 3);
        assert_eq!((gets() - gets_before, scripts() - scripts_before), (3, 3));
    }
}

/// A service asking for the badges of users the truth has nothing for (a
/// push gateway's stale ids) gets their empty badges, and Redis keeps no
/// keys for them: only a user's own read loads a user with nothing.
#[tokio::test]
async fn badges_of_users_nobody_knows_store_nothing() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        seed(&app, Some(&store)).await;
        let before = app.redis.keys();
        let ghosts: Vec<String> = (0..50).map(|i| format!("ghost{i}")).collect();
        let mut users: Vec<&str> = ghosts.iter().map(String::as_str).collect();
        users.push("mallory");
        let answer = app.badges("acme", &users).await;
        assert_eq!(answer.status, 200, "{kind:?}: {:?}", answer.body);
        let totals: Vec<u64> =
            answer.body["badges"].as_array().unwrap().iter().map(|b| b["total"].as_u64().unwrap()).collect();
        assert_eq!(totals[..50], [0; 50], "{kind:?}");
        assert_eq!(totals[50], 1, "{kind:?}: a member's badge is theirs");
        let stored: Vec<String> = app.redis.keys().into_iter().filter(|key| !before.contains(key)).collect();
        assert!(stored.iter().all(|key| !key.contains("ghost")), "{kind:?}: {stored:?}");
        drop(app);
        store.drop_database().await;
    }
}
