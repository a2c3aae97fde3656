//! The product's most important test: a seeded, reproducible random history
//! played against the API by many concurrent clients, then compared with the
//! model computed from the SQL store.
//!
//! The generator plays the app (stores each message in SQL, then touches),
//! sends duplicate and delayed (out-of-order) touches, marks read from 2-3
//! devices per user with stale and fresh acks, lists and samples badges,
//! deletes conversations, mentions members (or everyone), recalls messages,
//! mutes, pins and marks unread, and, in one variant, `kill -9`s Redis mid-run
//! and restarts it empty. During the run every list answer's badge must equal
//! what its rows count. At the end, after one reconcile pass, every user's
//! list and badge must equal the model; a second pass must find no drift.
//! The model is the app's data (heads, memberships, and the mentions and
//! recalls the generator sent) with unread's cursors and settings.
//!
//! `UNREAD_HISTORY_OPS` sets the size (CI: 10 000 per variant);
//! `UNREAD_HISTORY_SEED` the seed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::store::{Kind, MessageStore};
use crate::support::{App, SERVICE_TOKEN, Setup, jwt};

const TENANT: &str = "hist";
const USERS: usize = 24;
const CONVERSATIONS: usize = 36;
const CLIENTS: usize = 8;
const DEVICES: usize = 3;
const MAX_DELETES: usize = 3;

struct Conversation {
    id: String,
    category: &'static str,
    members: Vec<String>,
    last_seq: AtomicU64,
    deleted: AtomicBool,
}

#[derive(Default)]
struct Counters {
    ops: AtomicUsize,
    touches: AtomicUsize,
    refused_touches: AtomicUsize,
    duplicate_touches: AtomicUsize,
    delayed_touches: AtomicUsize,
    mark_reads: AtomicUsize,
    lists: AtomicUsize,
    badges: AtomicUsize,
    deletes: AtomicUsize,
    degraded: AtomicUsize,
    recalls: AtomicUsize,
    flags: AtomicUsize,
}

/// A message that mentions `users` (everyone but the sender with `all`).
struct Mention {
    conversation: String,
    seq: u64,
    sender: String,
    users: Vec<String>,
    all: bool,
}

struct World {
    app: App,
    store: MessageStore,
    conversations: Vec<Conversation>,
    delayed: Mutex<Vec<Value>>,
    mentions: Mutex<Vec<Mention>>,
    /// (conversation, seq) recalled.
    recalls: Mutex<HashSet<(String, u64)>>,
    /// (user, device) -> conversation -> newest seq that device has seen.
    seen: Mutex<HashMap<(String, usize), HashMap<String, u64>>>,
    clock: AtomicU64,
    counters: Counters,
    kill_at: Option<usize>,
    killed: AtomicBool,
}

fn ops() -> usize {
    std::env::var("UNREAD_HISTORY_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

fn seed() -> u64 {
    std::env::var("UNREAD_HISTORY_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(2026)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_mariadb() {
    run(Kind::MariaDb, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_postgres() {
    run(Kind::Postgres, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_mariadb_with_redis_killed() {
    run(Kind::MariaDb, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_postgres_with_redis_killed() {
    run(Kind::Postgres, true).await;
}

async fn run(kind: Kind, kill_redis: bool) {
    let total = ops();
    let mut rng = StdRng::seed_from_u64(seed());
    let store = MessageStore::create(kind).await;
    let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
    let users: Vec<String> = (0..USERS).map(|i| format!("u{i:02}")).collect();
    let mut conversations = Vec::new();
    for i in 0..CONVERSATIONS {
        let size = if i % 2 == 0 { 2 } else { rng.random_range(3..=8) };
        let members: Vec<String> = users.choose_multiple(&mut rng, size).cloned().collect();
        let category = ["chat", "chat", "system", "trade"][i % 4];
        let id = format!("c{i:02}");
        store.create_conversation(TENANT, &id, category, &members).await;
        conversations.push(Conversation {
            id,
            category,
            members,
            last_seq: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
        });
    }
    let world = Arc::new(World {
        app,
        store,
        conversations,
        delayed: Mutex::new(Vec::new()),
        mentions: Mutex::new(Vec::new()),
        recalls: Mutex::new(HashSet::new()),
        seen: Mutex::new(HashMap::new()),
        clock: AtomicU64::new(1_764_460_800_000),
        counters: Counters::default(),
        kill_at: kill_redis.then_some(total / 2),
        killed: AtomicBool::new(false),
    });

    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let world = world.clone();
            let seed = seed() * 1000 + client as u64;
            tokio::spawn(async move { play(&world, StdRng::seed_from_u64(seed), total / CLIENTS).await })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    // Every held-back touch arrives in the end.
    for touch in std::mem::take(&mut *world.delayed.lock().await) {
        world.app.touch(touch).await;
    }

    let before = world.app.reconcile_all(TENANT).await;
    let after = world.app.reconcile_all(TENANT).await;
    let c = &world.counters;
    println!(
        "history {kind:?}{}: {} ops ({} touches, {} refused while Redis was down, {} duplicate, {} delayed; {} mark-reads; \
         {} lists; {} badges; {} deletes; {} recalls; {} flags; {} degraded answers); drift before reconcile: {} of {} users, max {}; after: {} users, max {}",
        if kill_redis { " with Redis killed" } else { "" },
        c.ops.load(SeqCst),
        c.touches.load(SeqCst),
        c.refused_touches.load(SeqCst),
        c.duplicate_touches.load(SeqCst),
        c.delayed_touches.load(SeqCst),
        c.mark_reads.load(SeqCst),
        c.lists.load(SeqCst),
        c.badges.load(SeqCst),
        c.deletes.load(SeqCst),
        c.recalls.load(SeqCst),
        c.flags.load(SeqCst),
        c.degraded.load(SeqCst),
        before["drifted"],
        before["checked"],
        before["max_drift"],
        after["drifted"],
        after["max_drift"],
    );
    assert!(c.ops.load(SeqCst) >= total - CLIENTS);
    assert_eq!(
        (after["drifted"].as_u64(), after["max_drift"].as_u64()),
        (Some(0), Some(0)),
        "a second pass found drift"
    );
    if kill_redis {
        assert!(world.killed.load(SeqCst));
        assert!(c.refused_touches.load(SeqCst) + c.degraded.load(SeqCst) > 0, "the kill was noticed");
    }
    for user in &users {
        compare_with_model(&world, user).await;
    }
    let World { app, store, .. } = Arc::into_inner(world).unwrap();
    drop(app);
    store.drop_database().await;
}

/// One client's share of the history.
async fn play(world: &World, mut rng: StdRng, ops: usize) {
    for _ in 0..ops {
        let n = world.counters.ops.fetch_add(1, SeqCst);
        if world.kill_at == Some(n) {
            world.app.redis.kill();
            world.killed.store(true, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            world.app.redis.restart();
        }
        match rng.random_range(0..100) {
            0..38 => send(world, &mut rng).await,
            38..41 => deliver_delayed(world, &mut rng).await,
            41..64 => mark_read(world, &mut rng).await,
            64..80 => list(world, &mut rng).await,
            80..90 => badge(world, &mut rng).await,
            90..93 => recall(world, &mut rng).await,
            93..99 => flag(world, &mut rng).await,
            _ => delete(world, &mut rng).await,
        }
    }
}

fn live<'a>(world: &'a World, rng: &mut StdRng) -> Option<&'a Conversation> {
    let live: Vec<&Conversation> = world.conversations.iter().filter(|c| !c.deleted.load(SeqCst)).collect();
    live.choose(rng).copied()
}

async fn send(world: &World, rng: &mut StdRng) {
    let Some(conversation) = live(world, rng) else { return };
    let sender = conversation.members.choose(rng).unwrap();
    let seq = conversation.last_seq.fetch_add(1, SeqCst) + 1;
    // Roughly increasing time, with same-millisecond messages.
    let ts = world.clock.fetch_add(rng.random_range(0..2), SeqCst);
    let preview = json!({"text": format!("{} #{seq}", conversation.id), "type": "text", "sender_name": sender});
    world.store.store_message(TENANT, &conversation.id, seq, ts, sender, &preview.to_string()).await;
    let mention = Mention {
        conversation: conversation.id.clone(),
        seq,
        sender: sender.clone(),
        users: if rng.random_bool(0.2) {
            conversation.members.choose_multiple(rng, 2).cloned().collect()
        } else {
            Vec::new()
        },
        all: rng.random_bool(0.05),
    };
    let touch = json!({
        "tenant": TENANT, "conversation": conversation.id, "seq": seq, "ts": ts, "sender": sender,
        "members": conversation.members, "preview": preview, "category": conversation.category,
        "mentions": mention.users, "mention_all": mention.all,
    });
    world.mentions.lock().await.push(mention);
    if rng.random_bool(0.1) {
        world.counters.delayed_touches.fetch_add(1, SeqCst);
        world.delayed.lock().await.push(touch);
        return;
    }
    touch_now(world, touch.clone()).await;
    if rng.random_bool(0.05) {
        world.counters.duplicate_touches.fetch_add(1, SeqCst);
        touch_now(world, touch).await;
    }
}

async fn touch_now(world: &World, touch: Value) {
    let answer = world.app.touch(touch).await;
    world.counters.touches.fetch_add(1, SeqCst);
    match answer.status {
        200 => {}
        // The message is safe in SQL; the next reconcile picks it up.
        503 if world.kill_at.is_some() => {
            world.counters.refused_touches.fetch_add(1, SeqCst);
        }
        status => panic!("touch answered {status}: {:?}", answer.body),
    }
}

async fn deliver_delayed(world: &World, rng: &mut StdRng) {
    let touch = {
        let mut delayed = world.delayed.lock().await;
        if delayed.is_empty() {
            return;
        }
        let i = rng.random_range(0..delayed.len());
        delayed.swap_remove(i)
    };
    touch_now(world, touch).await;
}

async fn mark_read(world: &World, rng: &mut StdRng) {
    let Some(conversation) = live(world, rng) else { return };
    let user = conversation.members.choose(rng).unwrap();
    let device = rng.random_range(0..DEVICES);
    let seen = world
        .seen
        .lock()
        .await
        .get(&(user.clone(), device))
        .and_then(|s| s.get(&conversation.id).copied())
        .unwrap_or(0);
    // A stale ack (what this device last saw) or a fresh one (pushed the newest).
    let ack = if rng.random_bool(0.3) { conversation.last_seq.load(SeqCst) } else { seen };
    if ack == 0 {
        return;
    }
    let answer = world.app.mark_read(TENANT, user, &conversation.id, ack).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert!(answer.body["read_seq"].as_u64().unwrap() >= ack);
    check_badge_sum(&answer.body["badge"]);
    count_degraded(world, &answer.body);
    world.counters.mark_reads.fetch_add(1, SeqCst);
}

async fn list(world: &World, rng: &mut StdRng) {
    let user = format!("u{:02}", rng.random_range(0..USERS));
    let device = rng.random_range(0..DEVICES);
    let answer = world.app.list(TENANT, &user, "limit=100").await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let rows = answer.body["conversations"].as_array().unwrap();
    let sum: u64 = rows.iter().map(badge_count).sum();
    assert_eq!(answer.body["badge"]["total"].as_u64(), Some(sum), "badge != what the list counts: {}", answer.body);
    check_badge_sum(&answer.body["badge"]);
    count_degraded(world, &answer.body);
    let mut seen = world.seen.lock().await;
    let device_seen = seen.entry((user, device)).or_default();
    for row in rows {
        device_seen.insert(row["id"].as_str().unwrap().to_string(), row["last_seq"].as_u64().unwrap());
    }
    world.counters.lists.fetch_add(1, SeqCst);
}

async fn badge(world: &World, rng: &mut StdRng) {
    let user = format!("u{:02}", rng.random_range(0..USERS));
    let answer = world.app.badge(TENANT, &user).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    check_badge_sum(&answer.body);
    count_degraded(world, &answer.body);
    world.counters.badges.fetch_add(1, SeqCst);
}

async fn delete(world: &World, rng: &mut StdRng) {
    if world.counters.deletes.load(SeqCst) >= MAX_DELETES {
        return;
    }
    let Some(conversation) = live(world, rng) else { return };
    if conversation.deleted.swap(true, SeqCst) {
        return;
    }
    world.counters.deletes.fetch_add(1, SeqCst);
    world.store.delete_conversation(TENANT, &conversation.id).await;
    let members: Vec<&str> = conversation.members.iter().map(String::as_str).collect();
    let answer = world.app.delete_conversation(TENANT, &conversation.id, &members).await;
    assert!(answer.status == 200 || (answer.status == 503 && world.kill_at.is_some()), "{:?}", answer.body);
}

/// A message was recalled (recorded first: unread writes it to SQL first).
async fn recall(world: &World, rng: &mut StdRng) {
    let Some(conversation) = live(world, rng) else { return };
    let last = conversation.last_seq.load(SeqCst);
    if last == 0 {
        return;
    }
    let seq = rng.random_range(1..=last);
    world.recalls.lock().await.insert((conversation.id.clone(), seq));
    let body = json!({"tenant": TENANT, "conversation": conversation.id, "seq": seq, "members": conversation.members});
    let answer = world.app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.into()), Some(body.to_string())).await;
    assert!(answer.status == 200 || (answer.status == 503 && world.kill_at.is_some()), "{:?}", answer.body);
    world.counters.recalls.fetch_add(1, SeqCst);
}

/// A member mutes, unmutes, pins, unpins or marks unread.
async fn flag(world: &World, rng: &mut StdRng) {
    let Some(conversation) = live(world, rng) else { return };
    let user = conversation.members.choose(rng).unwrap();
    let (action, body) = match rng.random_range(0..5) {
        0 | 1 => ("mute", json!({"muted": rng.random_bool(0.6)})),
        2 | 3 => ("pin", json!({"pinned": rng.random_bool(0.5)})),
        _ => ("mark-unread", json!({})),
    };
    let path = format!("/v1/conversations/{}/{action}", conversation.id);
    let answer = world.app.send("POST", &path, Some(jwt(TENANT, user)), Some(body.to_string())).await;
    let code = answer.body["error"]["code"].as_str();
    let expected = match answer.status {
        200 => {
            check_badge_sum(&answer.body["badge"]);
            true
        }
        // Not (yet) the user's: its first touch is held back.
        404 => code == Some("unknown_conversation"),
        409 => code == Some("too_many_pins"),
        503 => world.kill_at.is_some(),
        _ => false,
    };
    assert!(expected, "{action}: {} {:?}", answer.status, answer.body);
    world.counters.flags.fetch_add(1, SeqCst);
}

/// What a list row adds to `badge.total`.
fn badge_count(row: &Value) -> u64 {
    let unread = row["unread"].as_u64().unwrap();
    match (row["muted"] == true, row["marked_unread"] == true && unread == 0) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => unread,
    }
}

fn check_badge_sum(badge: &Value) {
    let categories: u64 = badge["categories"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(badge["total"].as_u64(), Some(categories), "{badge}");
}

fn count_degraded(world: &World, body: &Value) {
    if body["degraded"] == true {
        world.counters.degraded.fetch_add(1, SeqCst);
    }
}

/// The user's list and badge must be exactly what the model says.
async fn compare_with_model(world: &World, user: &str) {
    let heads = world.store.heads(TENANT).await;
    let cursors = world.store.cursors(TENANT).await;
    let settings = world.store.settings(TENANT).await;
    let memberships = world.store.memberships(TENANT).await;
    let recalls = world.recalls.lock().await;
    let mentions = world.mentions.lock().await;
    let mut expected: Vec<((bool, u64, String), Value)> = memberships
        .get(user)
        .into_iter()
        .flatten()
        .filter_map(|conversation| {
            let head = heads.get(conversation)?;
            let key = (user.to_string(), conversation.clone());
            let read = cursors.get(&key).copied().unwrap_or(0);
            let (muted, pinned, marked_unread) = settings.get(&key).copied().unwrap_or_default();
            let counts =
                |seq: u64| seq > read && seq <= head.last_seq && !recalls.contains(&(conversation.clone(), seq));
            let unread = (read + 1..=head.last_seq).filter(|s| counts(*s)).count() as u64;
            let mentioned = mentions
                .iter()
                .filter(|m| &m.conversation == conversation && counts(m.seq) && m.sender != user)
                .filter(|m| m.all || m.users.iter().any(|u| u == user))
                .map(|m| m.seq)
                .collect::<HashSet<_>>()
                .len();
            let row = json!({
                "id": conversation, "category": head.category, "unread": unread,
                "mentions": mentioned, "muted": muted, "pinned": pinned, "marked_unread": marked_unread,
                "last_seq": head.last_seq, "read_seq": read, "ts": head.last_ts,
                "preview": serde_json::from_str::<Value>(&head.preview).unwrap(),
            });
            Some(((pinned, head.last_ts * 1000 + head.last_seq % 1000, conversation.clone()), row))
        })
        .collect();
    expected.sort_by(|a, b| b.0.cmp(&a.0));
    let expected: Vec<Value> = expected.into_iter().map(|(_, row)| row).collect();
    let actual = world.app.whole_list(TENANT, user, 7).await;
    assert_eq!(actual, expected, "{user}: list differs from the model");
    let mut categories: HashMap<String, u64> = HashMap::new();
    let (mut muted, mut mentioned) = (0, 0);
    for row in &expected {
        let counted = badge_count(row);
        if counted > 0 {
            *categories.entry(row["category"].as_str().unwrap().to_string()).or_default() += counted;
        }
        if row["muted"] == true {
            muted += row["unread"].as_u64().unwrap();
        }
        mentioned += row["mentions"].as_u64().unwrap();
    }
    let badge = world.app.badge(TENANT, user).await.body;
    let total: u64 = categories.values().sum();
    assert_eq!(
        badge,
        json!({"total": total, "muted": muted, "mentions": mentioned, "categories": categories, "degraded": false}),
        "{user}"
    );
}
