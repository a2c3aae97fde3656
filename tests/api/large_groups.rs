//! Large conversations (read diffusion): past `large_group_threshold`
//! members a message is written once, to the conversation's head and log,
//! and each member's state catches up when the member's keys are next used.
//! What members see must be exactly what writing every member shows: a
//! seeded random history runs on two apps side by side, one writing every
//! member of every conversation, one with read diffusion, and compares what
//! members see after every step, before the group grows past the threshold
//! and after; on one Redis, and on a Redis Cluster (where a member's
//! catch-up gets the heads and logs of other slots from the call).

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, IteratorRandom};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::store::{KINDS, Kind, MessageStore};
use crate::support::{App, Events, Setup, ids, message};

/// Members of the group at first (under the threshold), and how many join
/// at once halfway (taking it past the threshold).
const MEMBERS: usize = 45;
const JOINING: usize = 15;
const THRESHOLD: usize = 50;

fn member(i: usize) -> String {
    format!("m{i}")
}

async fn app(threshold: usize, cluster: bool) -> App {
    App::with(Setup {
        max_conversations: 4,
        variables: vec![("large_group_threshold", threshold.to_string())],
        cluster,
        ..Setup::default()
    })
    .await
}

/// An app whose conversations become large past 3 members, on one Redis or
/// a cluster, with the SQL store `store` if any.
async fn app_with_store(store: Option<&MessageStore>, cluster: bool) -> App {
    App::with(Setup {
        sql_url: store.map(|s| s.url.clone()),
        variables: vec![("large_group_threshold", "3".into())],
        cluster,
        ..Setup::default()
    })
    .await
}

/// Conversation "big" of `count` members m0, m1, ... in the app's store,
/// and its first message (from m0, naming them all, past the threshold):
/// it is large. Returns the members. (`label` names the variant.)
async fn made_large_in_store(store: &MessageStore, app: &App, count: usize, label: &str) -> Vec<String> {
    let members: Vec<String> = (0..count).map(member).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    store.create_conversation("acme", "big", "chat", &members).await;
    let first = message("acme", "big", 1, 1_001, "m0", &names);
    store.store_message("acme", "big", 1, 1_001, "m0", &first["preview"].to_string()).await;
    assert_eq!(app.touch(first).await.status, 200, "{label}");
    assert!(is_large(app), "{label}");
    members
}

/// Whether the app keeps the group's log: it is large.
fn is_large(app: &App) -> bool {
    app.redis.keys().iter().any(|key| key == "un:v2:head:{acme:big}:group")
}

/// What a user sees: every row of the whole list (its numbers, flags and
/// preview), then the badge.
async fn seen(app: &App, user: &str) -> Value {
    let rows = app.whole_list("acme", user, 3).await;
    let badge = app.badge("acme", user).await.body;
    json!({"rows": rows, "badge": {"total": badge["total"], "muted": badge["muted"], "mentions": badge["mentions"],
           "categories": badge["categories"]}})
}

/// The two apps, and the history's state that decides the next step.
struct Pair {
    /// Writes every member it is told of.
    every: App,
    /// Read diffusion: told of every member until a message names more
    /// than the threshold, then only of the sender and the mentioned.
    large: App,
    /// Whether a message named more members than the threshold.
    crossed: bool,
    members: BTreeSet<String>,
    left: BTreeSet<String>,
    last: u64,
    /// One-to-one conversations beside the group, for trims and badges.
    side_seq: u64,
}

impl Pair {
    /// A message of the group, by `sender`.
    async fn message(&mut self, sender: &str, mentions: &[String], mention_all: bool) {
        self.last += 1;
        let everyone: Vec<&str> = self.members.iter().map(String::as_str).collect();
        let mut named = vec![sender];
        named.extend(mentions.iter().map(String::as_str));
        if !self.crossed {
            self.crossed = everyone.len() > THRESHOLD;
            named = everyone.clone();
        }
        for (app, members) in [(&self.every, &everyone), (&self.large, &named)] {
            let mut body = message("acme", "big", self.last, 10_000 + self.last, sender, members);
            body["mentions"] = json!(mentions);
            body["mention_all"] = json!(mention_all);
            let answer = app.touch(body).await;
            assert_eq!(answer.status, 200, "{:?}", answer.body);
        }
    }

    /// A one-to-one message between `a` and `b`, newer than the group's.
    async fn side(&mut self, a: &str, b: &str) {
        self.side_seq += 1;
        let conversation = format!("side-{a}-{b}");
        for app in [&self.every, &self.large] {
            let body = message("acme", &conversation, self.side_seq, 10_000 + self.last + self.side_seq, a, &[a, b]);
            assert_eq!(app.touch(body).await.status, 200);
        }
    }

    async fn both(&self, call: impl AsyncFn(&App) -> u16) {
        let (every, large) = (call(&self.every).await, call(&self.large).await);
        assert_eq!(every, large, "the two apps answered differently");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_of_a_large_group_see_what_writing_every_member_shows() {
    side_by_side(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_of_a_large_group_on_a_cluster_see_what_writing_every_member_shows() {
    side_by_side(true).await;
}

/// A seeded random history on a group that grows past the threshold
/// halfway, on two apps: one writing every member, one with read diffusion.
/// Members join, leave, come back, and some who left go idle until their
/// keys expire. After every step a few members, and at the end every
/// member, see the same rows, numbers, previews and badges on both.
async fn side_by_side(cluster: bool) {
    let seed: u64 = std::env::var("UNREAD_HISTORY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    let mut rng = StdRng::seed_from_u64(seed);
    let (every, large) = tokio::join!(app(0, cluster), app(THRESHOLD, cluster));
    let mut pair = Pair {
        every,
        large,
        crossed: false,
        members: (0..MEMBERS).map(member).collect(),
        left: BTreeSet::new(),
        last: 0,
        side_seq: 0,
    };
    pair.message("m0", &[], false).await;
    assert!(!is_large(&pair.large), "under the threshold the group is not large");

    for step in 0..120 {
        if step == 40 {
            // The group grows past the threshold; its next message crosses.
            let joining: Vec<String> = (MEMBERS..MEMBERS + JOINING).map(member).collect();
            let names: Vec<&str> = joining.iter().map(String::as_str).collect();
            let last = pair.last;
            pair.both(async |app| app.join("acme", "big", last, &names).await.status).await;
            pair.members.extend(joining);
            // And one came and went just before, and was idle long enough
            // for its keys to expire: the crossing message does not bring
            // it back.
            pair.both(async |app| app.join("acme", "big", last, &["passer"]).await.status).await;
            pair.both(async |app| app.leave("acme", "big", &["passer"]).await.status).await;
            for app in [&pair.every, &pair.large] {
                app.redis.expire_user("acme", "passer");
            }
            pair.left.insert("passer".into());
            pair.message("m1", &[], false).await;
            let (every, large) = tokio::join!(seen(&pair.every, "passer"), seen(&pair.large, "passer"));
            assert_eq!(every, large, "seed {seed}: the one who came and went is back with read diffusion");
            assert!(pair.crossed && is_large(&pair.large), "the group did not become large");
        }
        let members: Vec<String> = pair.members.iter().cloned().collect();
        let someone = members.choose(&mut rng).unwrap().clone();
        let what = rng.random_range(0..100);
        let mut involved = vec![someone.clone()];
        match what {
            0..40 => {
                let count = rng.random_range(0..3);
                let mentions: Vec<String> =
                    members.choose_multiple(&mut rng, count).filter(|m| **m != someone).cloned().collect();
                involved.extend(mentions.iter().cloned());
                pair.message(&someone, &mentions, rng.random_bool(0.1)).await;
            }
            40..55 => {
                let seq = rng.random_range(pair.last.saturating_sub(5).max(1)..=pair.last + 1);
                pair.both(async |app| app.mark_read("acme", &someone, "big", seq).await.status).await;
            }
            55..63 => {
                let seq = rng.random_range(pair.last.saturating_sub(4).max(1)..=pair.last);
                let named: Vec<&str> = members.iter().map(String::as_str).collect();
                let preview = (seq == pair.last).then(|| json!({"text": format!("recalled {seq}")}));
                pair.both(async |app| app.recall("acme", "big", seq, &named, preview.clone()).await.status).await;
            }
            63..70 => {
                let muted = rng.random_bool(0.5);
                pair.both(async |app| app.flag("acme", &someone, "big", "mute", json!({"muted": muted})).await.status)
                    .await;
            }
            70..74 => {
                pair.both(async |app| app.flag("acme", &someone, "big", "mark-unread", json!({})).await.status).await;
            }
            74..78 if pair.members.len() > 40 => {
                pair.both(async |app| app.leave("acme", "big", &[&someone]).await.status).await;
                pair.members.remove(&someone);
                pair.left.insert(someone.clone());
            }
            78..82 => {
                let newcomer = match pair.left.iter().next().cloned() {
                    Some(back) if rng.random_bool(0.5) => back,
                    _ => format!("n{step}"),
                };
                let last = pair.last;
                pair.both(async |app| app.join("acme", "big", last, &[&newcomer]).await.status).await;
                pair.left.remove(&newcomer);
                pair.members.insert(newcomer.clone());
                involved.push(newcomer);
            }
            82..86 if !pair.left.is_empty() => {
                // One who left stays away until its keys expire (the leave's
                // tombstone with them): it sees nothing on either app, and
                // the group growing large does not bring it back.
                let gone = pair.left.iter().choose(&mut rng).unwrap().clone();
                for app in [&pair.every, &pair.large] {
                    app.redis.expire_user("acme", &gone);
                }
                involved.push(gone);
            }
            _ => {
                // A few members talk to many: their lists overflow, and the
                // group goes out of them and comes back.
                let other = member(rng.random_range(0..4));
                if other != someone {
                    pair.side(&someone, &other).await;
                    involved.push(other);
                }
            }
        }
        involved.extend(members.choose_multiple(&mut rng, 3).cloned());
        for user in involved {
            let (every, large) = tokio::join!(seen(&pair.every, &user), seen(&pair.large, &user));
            assert_eq!(every, large, "seed {seed}, step {step}: {user} sees something else with read diffusion");
        }
    }
    let everyone: BTreeSet<String> = pair.members.union(&pair.left).cloned().collect();
    for user in everyone {
        let (every, large) = tokio::join!(seen(&pair.every, &user), seen(&pair.large, &user));
        assert_eq!(every, large, "seed {seed}, at the end: {user} sees something else with read diffusion");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_to_a_large_group_is_written_once() {
    written_once(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_to_a_large_group_on_a_cluster_is_written_once() {
    written_once(true).await;
}

/// A member of more large conversations than one read of their records
/// names (500), every one of which moved, counts every message: on a
/// cluster the call is given every log, and the script reads the member's
/// records of those in batches; on one Redis it finds them by their clocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_of_many_large_groups_that_all_moved_counts_every_message() {
    const GROUPS: u64 = 520;
    for cluster in [false, true] {
        let app = App::with(Setup {
            max_conversations: 1_000,
            variables: vec![("large_group_threshold", "3".into())],
            cluster,
            ..Setup::default()
        })
        .await;
        for g in 0..GROUPS {
            let first = message("acme", &format!("g{g}"), 1, 1_000 + g, "m0", &["reader", "m0", "m1", "m2"]);
            assert_eq!(app.touch(first).await.status, 200);
        }
        assert_eq!(app.badge("acme", "reader").await.body["total"].as_u64(), Some(GROUPS), "cluster {cluster}");
        for g in 0..GROUPS {
            assert_eq!(app.touch(message("acme", &format!("g{g}"), 2, 2_000 + g, "m1", &["m1"])).await.status, 200);
        }
        assert_eq!(app.badge("acme", "reader").await.body["total"].as_u64(), Some(2 * GROUPS), "cluster {cluster}");
        let row = app.row("acme", "reader", "g7").await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(2), Some(2)), "cluster {cluster}");
    }
}

/// A user of tenant acme (n0, n1, ...) whose keys the primary that holds
/// conversation big's head serves (`beside`), or one another primary serves.
fn user_by_heads_primary(app: &App, beside: bool) -> String {
    let cluster = app.cluster.as_ref().unwrap();
    let heads = cluster.primary_of("{acme:big}").port;
    let on_heads = |user: &String| cluster.primary_of(&format!("{{acme:{user}}}")).port == heads;
    (0..100).map(|i| format!("n{i}")).find(|user| on_heads(user) == beside).unwrap()
}

/// On a cluster the members the head's primary serves are written in the
/// head's call, but the conversation's event stays the head's to give: a
/// late message that brings a newcomer beside the head (written in that
/// call) its mention publishes the newcomer's event and none for the
/// conversation, whose head did not move; and the newcomer's row is the one
/// Redis gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_mention_beside_a_large_groups_head_publishes_no_conversation_event() {
    let (one, app) = (app(10, false).await, app(10, true).await);
    let newcomer = user_by_heads_primary(&app, true);
    let members: Vec<String> = (0..40).map(member).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut late = message("acme", "big", 2, 1_002, "m0", &["m0", &newcomer]);
    late["mentions"] = json!([newcomer]);
    let mut rows = Vec::new();
    for app in [&one, &app] {
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &names)).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 3, 1_003, "m0", &["m0"])).await.status, 200);
        let mut events = Events::subscribe(app, "acme");
        assert_eq!(app.touch(late.clone()).await.status, 200);
        let events = events.take();
        assert!(events.iter().all(|e| !e["user"].is_null()), "a conversation event for a late message: {events:?}");
        assert!(events.iter().any(|e| e["user"] == newcomer.as_str()), "no event for {newcomer}: {events:?}");
        rows.push(app.row("acme", &newcomer, "big").await.unwrap());
    }
    assert_eq!(rows[1], rows[0]);
    assert_eq!(rows[1]["mentions"].as_u64(), Some(1), "{}", rows[1]);
}

/// A conversation deleted without naming one of its members leaves that
/// member's state and membership of its log behind. A recall that names
/// the member then reaches their state, as on one Redis: on a cluster too,
/// where the member's part (on another primary than the head's) cannot
/// see that the log is gone, and the membership alone once told it that
/// the conversation was large, so the recall skipped them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recall_reaches_a_member_a_delete_left_out_of_it() {
    let (one, app) = (app(3, false).await, app(3, true).await);
    let left_out = user_by_heads_primary(&app, false);
    let members: Vec<String> = (0..4).map(member).chain([left_out.clone()]).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut rows = Vec::new();
    for app in [&one, &app] {
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &names)).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 2, 1_002, "m0", &["m0"])).await.status, 200);
        let row = app.row("acme", &left_out, "big").await.unwrap();
        assert_eq!(row["unread"].as_u64(), Some(2), "{row}");
        assert_eq!(app.delete_conversation("acme", "big", &names[..4]).await.status, 200);
        assert_eq!(app.recall("acme", "big", 2, &[&left_out], None).await.status, 200);
        rows.push(app.row("acme", &left_out, "big").await.unwrap());
    }
    assert_eq!(rows[1], rows[0]);
    assert_eq!(rows[0]["unread"].as_u64(), Some(1), "{}", rows[0]);
}

/// A conversation deleted without naming one of its members, then made
/// large again by its next message: that member never left, as far as
/// unread was told, so it counts the new log's messages and recalls as a
/// member, as on one Redis. Its membership record of the first log once
/// read as caught up with the new one when the two counters met (the new
/// counter started over at 0): the member's row missed the messages until
/// the log moved again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_a_delete_left_out_of_counts_the_conversation_made_large_again() {
    let (one, app) = (app(3, false).await, app(3, true).await);
    let left_out = user_by_heads_primary(&app, false);
    let members: Vec<String> = (0..4).map(member).chain([left_out.clone()]).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut seen: [Vec<(Option<u64>, Option<u64>)>; 2] = Default::default();
    for (app, seen) in [&one, &app].into_iter().zip(&mut seen) {
        let mut look = async || {
            let row = app.row("acme", &left_out, "big").await.unwrap();
            let badge = app.badge("acme", &left_out).await.body["total"].as_u64();
            assert_eq!(badge, row["unread"].as_u64(), "{row}");
            seen.push((row["last_seq"].as_u64(), row["unread"].as_u64()));
        };
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &names)).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 2, 1_002, "m0", &["m0"])).await.status, 200);
        look().await;
        assert_eq!(app.delete_conversation("acme", "big", &names[..4]).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 3, 1_003, "m1", &names[..4])).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 4, 1_004, "m1", &["m1"])).await.status, 200);
        look().await;
        assert_eq!(app.recall("acme", "big", 4, &[&left_out], None).await.status, 200);
        look().await;
        assert_eq!(app.recall("acme", "big", 3, &["m1"], None).await.status, 200);
        look().await;
    }
    let counted = [(Some(2), Some(2)), (Some(4), Some(4)), (Some(4), Some(3)), (Some(4), Some(2))];
    assert_eq!(seen[0], counted, "one Redis");
    assert_eq!(seen[1], counted, "cluster");
}

/// A message to a large group costs Redis a few commands whatever its size,
/// publishes one event for the conversation (and one per member mentioned
/// by name, and the sender's), and every member counts it.
async fn written_once(cluster: bool) {
    let app = app(100, cluster).await;
    let members: Vec<String> = (0..400).map(member).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let before = app.redis.commands_run();
    assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &names)).await.status, 200);
    let converting = app.redis.commands_run() - before;
    assert!(converting > 400 * 3, "the first message writes every member it names: {converting}");

    let mut events = Events::subscribe(&app, "acme");
    let mentioned = "un:v2:{acme:m7}:groups";
    let record = app.redis.stored(mentioned, "big").unwrap();
    let before = app.redis.commands_run();
    let mut body = message("acme", "big", 2, 1_002, "m1", &["m1", "m7"]);
    body["mentions"] = json!(["m7"]);
    assert_eq!(app.touch(body).await.status, 200);
    let commands = app.redis.commands_run() - before;
    // On a cluster the head and the members are rounds of their own, and
    // each member's part first asks for the logs it catches up with.
    let bound = if cluster { 90 } else { 60 };
    assert!(commands < bound, "a message to 400 members took {commands} commands");
    let events = events.take();
    let conversation: Vec<&Value> = events.iter().filter(|e| e["user"].is_null()).collect();
    assert_eq!(conversation.len(), 1, "{events:?}");
    assert_eq!(conversation[0]["conversation"], "big");
    assert_eq!(conversation[0]["seq"], 2);
    let users: BTreeSet<&str> = events.iter().filter_map(|e| e["user"].as_str()).collect();
    assert_eq!(users, BTreeSet::from(["m1", "m7"]), "{events:?}");
    // Only messages came since: the member mentioned keeps its record until
    // its next call (its state holds the message and its mention).
    assert_eq!(app.redis.stored(mentioned, "big").unwrap(), record, "m7's record");

    for (user, unread, mentions) in [("m0", 1, 0), ("m1", 0, 0), ("m7", 2, 1), ("m399", 2, 0)] {
        let row = app.row("acme", user, "big").await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["mentions"].as_u64()), (Some(unread), Some(mentions)), "{user}");
        assert_eq!(row["preview"]["text"], "message 2", "{user}");
        assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(unread), "{user}");
    }
    // A member's next call pays for what came: the state is written then.
    let state = app.redis.stored("un:v2:{acme:m399}:conv", "big");
    assert!(state.unwrap().starts_with("2:0:"), "m399 caught up on reading");
    // A membership record is how far the member caught up, a number: the
    // conversation's keys are named from its identifier.
    let record = app.redis.stored("un:v2:{acme:m399}:groups", "big").unwrap();
    assert!(record.parse::<u64>().is_ok(), "{record:?}");
    // A record of the earlier layout (with the keys' names) still reads: on a
    // cluster, as the records a script answers when it asks for logs.
    let groups = "un:v2:{acme:m398}:groups";
    let applied = app.redis.stored(groups, "big").unwrap();
    let earlier = format!("{applied}\nun:v2:head:{{acme:big}}\nun:v2:head:{{acme:big}}:group");
    let _: i64 = app.holder(groups).command(&["HSET", groups, "big", &earlier]);

    // A conversation of m1's whose last message comes between messages 2
    // and 3 of the large one (scores 1 002 002 and 1 003 003).
    assert_eq!(app.touch(message("acme", "side", 500, 1_002, "m9", &["m9", "m1"])).await.status, 200);
    let first_row = || async { app.list("acme", "m1", "limit=1").await.body["conversations"][0]["id"].clone() };
    assert_eq!(first_row().await, "side");

    // A message that names only its sender (who has read the conversation)
    // writes the conversation's head, its log's counter and its clock, and
    // the sender's state (and version), though the sender's state catches
    // up with the log too; on a cluster also the head's earlier messages,
    // for a list that reads its previews apart. Only messages came since
    // the sender's membership record, so it stays, and so does the
    // sender's list score: its next call raises it to the head's.
    let sender = "un:v2:{acme:m1}:groups";
    let list = "un:v2:{acme:m1}:list";
    let record = app.redis.stored(sender, "big").unwrap();
    let score = |list: Vec<(String, f64)>| list.into_iter().find(|(c, _)| c == "big").map(|(_, s)| s as u64);
    assert_eq!(score(app.redis.sorted_set(list)), Some(1_002_002));
    let before = app.redis.writes_run();
    assert_eq!(app.touch(message("acme", "big", 3, 1_003, "m1", &["m1"])).await.status, 200);
    let writes = app.redis.writes_run() - before;
    assert_eq!(writes, if cluster { 6 } else { 5 }, "a message to 400 members");
    assert_eq!(app.redis.stored(sender, "big").unwrap(), record, "the sender's record waits for its next call");
    assert_eq!(score(app.redis.sorted_set(list)), Some(1_002_002), "the sender's score waits too");
    // The sender's next call orders its list by the message all the same.
    assert_eq!(first_row().await, "big");
    assert_eq!(score(app.redis.sorted_set(list)), Some(1_003_003), "the sender's score caught up");
    let caught_up = app.redis.stored(sender, "big").unwrap();
    assert_ne!(caught_up, record, "the sender's call moved its record");
    let record = caught_up;
    // An @all mention from another member comes after; the sender's next
    // call counts it and moves its record.
    let mut body = message("acme", "big", 4, 1_004, "m2", &["m2"]);
    body["mention_all"] = json!(true);
    assert_eq!(app.touch(body).await.status, 200);
    let row = app.row("acme", "m1", "big").await.unwrap();
    let numbers = (row["last_seq"].as_u64(), row["unread"].as_u64(), row["mentions"].as_u64());
    assert_eq!(numbers, (Some(4), Some(1), Some(1)), "the sender after an @all mention");
    assert_ne!(app.redis.stored(sender, "big").unwrap(), record, "the sender caught up");
    let row = app.row("acme", "m398", "big").await.unwrap();
    assert_eq!((row["last_seq"].as_u64(), row["unread"].as_u64()), (Some(4), Some(4)), "m398");
}

#[tokio::test]
async fn a_sender_s_large_group_keeps_its_place_when_a_catch_up_fills_the_list() {
    keeps_its_place(false).await;
}

#[tokio::test]
async fn a_sender_s_large_group_on_a_cluster_keeps_its_place_when_a_catch_up_fills_the_list() {
    keeps_its_place(true).await;
}

/// A large group's message leaves its sender's list score to the sender's
/// next catch-up; a catch-up that brings another conversation back into a
/// full list (4 here) must not push that group out for older than it is.
async fn keeps_its_place(cluster: bool) {
    let app = app(3, cluster).await;
    let members: Vec<String> = (0..5).map(member).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    // Both groups are large from their first message; m1's records name
    // "big2" first, so its catch-up takes "big2" first.
    assert_eq!(app.touch(message("acme", "big2", 1, 1_000, "m0", &names)).await.status, 200);
    assert_eq!(app.touch(message("acme", "big", 1, 2_000, "m0", &names)).await.status, 200);
    for (i, id) in ["o1", "o2", "o3"].into_iter().enumerate() {
        assert_eq!(app.touch(message("acme", id, 1, 3_000 + i as u64, "x", &["x", "m1"])).await.status, 200);
    }
    assert_eq!(ids(&app.whole_list("acme", "m1", 10).await), ["o3", "o2", "o1", "big"], "big2 went to kept");
    // m1 writes to "big" (its score waits), then "big2" has a newer message
    // that does not write m1.
    assert_eq!(app.touch(message("acme", "big", 2, 5_000, "m1", &["m1"])).await.status, 200);
    assert_eq!(app.touch(message("acme", "big2", 2, 4_000, "m0", &["m0"])).await.status, 200);
    // m1's next call brings "big2" back and trims the oldest: "o1", not "big".
    assert_eq!(ids(&app.whole_list("acme", "m1", 10).await), ["big", "big2", "o3", "o2"]);
    let row = app.row("acme", "m1", "big").await.unwrap();
    assert_eq!((row["last_seq"].as_u64(), row["unread"].as_u64()), (Some(2), Some(0)), "m1's own message");
}

#[tokio::test]
async fn a_member_of_many_large_groups_reads_only_the_logs_that_moved() {
    reads_only_what_moved(false).await;
}

#[tokio::test]
async fn a_member_of_many_large_groups_on_a_cluster_reads_only_the_logs_that_moved() {
    reads_only_what_moved(true).await;
}

/// A member's call learns from the tenant's clocks (a few keys) which of its
/// large conversations moved, and reads the logs of those only: a call with
/// nothing new costs no read per conversation, and one message costs one
/// log read, and counts.
async fn reads_only_what_moved(cluster: bool) {
    const GROUPS: u64 = 60;
    let app = app_with_store(None, cluster).await;
    let members = ["m0", "m1", "m2", "m3", "m4"];
    for g in 0..GROUPS {
        assert_eq!(app.touch(message("acme", &format!("g{g}"), 1, 1_000 + g, "m0", &members)).await.status, 200);
    }
    // What a badge call of m4 runs in Redis: its total, the commands, and
    // how many logs it read (a log read is the only ZRANGEBYSCORE).
    let badge = async || {
        let before = app.redis.commands_by_name();
        let total = app.badge("acme", "m4").await.body["total"].as_u64();
        let after = app.redis.commands_by_name();
        let delta = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
        let commands: u64 = after.values().sum::<u64>() - before.values().sum::<u64>();
        (total, commands, delta("zrangebyscore"), delta("zscore"))
    };
    let (total, commands, logs_read, counters_read) = badge().await;
    assert_eq!(total, Some(GROUPS));
    assert_eq!((logs_read, counters_read), (0, 0), "nothing moved, yet {commands} commands read logs");
    assert!(commands < GROUPS, "a call with nothing new took {commands} commands for {GROUPS} large groups");

    assert_eq!(app.touch(message("acme", "g7", 2, 2_000, "m0", &["m0"])).await.status, 200);
    let (total, commands, logs_read, _) = badge().await;
    assert_eq!(total, Some(GROUPS + 1), "the new message counts");
    assert_eq!(logs_read, 1, "one conversation moved: {commands} commands");
    let row = app.row("acme", "m4", "g7").await.unwrap();
    assert_eq!((row["unread"].as_u64(), row["preview"]["text"].as_str()), (Some(2), Some("message 2")));

    // A log whose clock holds nothing (a conversation made large before the
    // clocks, or a clock key lost) is read, so nothing it holds is missed.
    assert_eq!(app.touch(message("acme", "g9", 2, 2_001, "m0", &["m0"])).await.status, 200);
    app.redis.delete_keys("un:v2:clock:");
    let (total, commands, logs_read, _) = badge().await;
    assert_eq!(total, Some(GROUPS + 2), "the message whose clock went counts");
    assert!(logs_read >= 1, "{commands} commands");
}

/// A member leaves a large conversation before catching up with its newest
/// message: leaving takes off the badge what the conversation counted with
/// that message, and the member's devices are told.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leaving_a_large_group_before_catching_up_tells_the_members_devices() {
    for cluster in [false, true] {
        let app = app(3, cluster).await;
        let members: Vec<String> = (0..5).map(member).collect();
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &names)).await.status, 200);
        assert!(is_large(&app));
        assert_eq!(app.mark_read("acme", "m4", "big", 1).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 2, 1_002, "m1", &["m1"])).await.status, 200);
        let mut events = Events::subscribe(&app, "acme");
        assert_eq!(app.leave("acme", "big", &["m4"]).await.status, 200);
        let told: Vec<Value> = events.take().into_iter().filter(|e| e["user"] == "m4").collect();
        assert_eq!(told.len(), 1, "cluster {cluster}: {told:?}");
        assert_eq!(told[0]["badge"]["total"], 0, "cluster {cluster}");
        assert_eq!(app.badge("acme", "m4").await.body["total"], 0, "cluster {cluster}");
    }
}

/// Message `seq` of conversation "big" from `sender`, stored in the truth
/// and touched, naming `named`.
async fn send_stored(store: &MessageStore, app: &App, seq: u64, sender: &str, named: &[&str]) {
    let touch = message("acme", "big", seq, 1_000 + seq, sender, named);
    store.store_message("acme", "big", seq, 1_000 + seq, sender, &touch["preview"].to_string()).await;
    assert_eq!(app.touch(touch).await.status, 200, "message {seq}");
}

/// After messages 1 to 4 of "big" sent by m0 to m3 in turn (the first
/// naming all of m0 to m4, the others only their senders): each member's
/// row and badge count what came after what it sent.
async fn assert_counts_four_messages(app: &App, label: &str) {
    for (user, unread) in [("m0", 3), ("m1", 2), ("m2", 1), ("m3", 0), ("m4", 4)] {
        let row = app.row("acme", user, "big").await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(unread), Some(4)), "{label} {user}");
        assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(unread), "{label} {user}");
    }
}

/// With a SQL store, the truth records that a conversation is large before
/// Redis makes it so. A reconcile before the members caught up finds
/// nothing to fix; a Redis that lost everything makes the conversation
/// large again from the truth, the members rebuilt from it catch up with
/// its newer messages, and a reconcile again finds nothing to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_group_on_a_sql_store_stays_large_through_a_redis_that_lost_everything() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_with_store(Some(&store), false).await;
        let members: Vec<String> = (0..5).map(member).collect();
        store.create_conversation("acme", "big", "chat", &members).await;
        let send = async |seq: u64, sender: &str, named: &[&str]| send_stored(&store, &app, seq, sender, named).await;
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        send(1, "m0", &names).await;
        assert!(is_large(&app), "{kind:?}");
        let recorded = store.rows("SELECT conversation FROM unread_large_conversations", &[]).await;
        assert_eq!(recorded, [["big"]], "{kind:?}: the truth knows the conversation is large");
        send(2, "m1", &["m1"]).await;
        let report = app.reconcile_all("acme").await;
        assert_eq!(report["drifted"], 0, "{kind:?}: members not caught up are no drift: {report}");

        app.redis.flush_all();
        send(3, "m2", &["m2"]).await;
        assert!(is_large(&app), "{kind:?}: large again after Redis lost it");
        send(4, "m3", &["m3"]).await;
        assert_counts_four_messages(&app, &format!("{kind:?}")).await;
        // Rebuilt once, each member catches up with what comes next.
        send(5, "m4", &["m4"]).await;
        let row = app.row("acme", "m0", "big").await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(4), Some(5)), "{kind:?}");
        let report = app.reconcile_all("acme").await;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// With a SQL store, a large conversation's keys lost alone (as a cluster's
/// primary that restarts empty loses its slots' keys while the members'
/// keys live on elsewhere) are made again by the next message: the new
/// log's counter starts above the members' records of the lost one, so
/// they catch up with every message after the loss. When it started over
/// at 0, a member caught up to the lost log's counter took the new log for
/// one it had seen once the two counters met, and its row missed the
/// messages until the log moved again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_groups_keys_lost_alone_are_made_again_above_its_members_records() {
    for (kind, cluster) in [(Kind::Postgres, false), (Kind::MariaDb, true)] {
        let store = MessageStore::create(kind).await;
        let app = app_with_store(Some(&store), cluster).await;
        let members: Vec<String> = (0..5).map(member).collect();
        store.create_conversation("acme", "big", "chat", &members).await;
        let send = async |seq: u64, sender: &str, named: &[&str]| send_stored(&store, &app, seq, sender, named).await;
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        send(1, "m0", &names).await;
        send(2, "m1", &["m1"]).await;
        for user in &names {
            assert_eq!(app.row("acme", user, "big").await.unwrap()["last_seq"].as_u64(), Some(2), "{kind:?} {user}");
        }
        app.redis.delete_keys("un:v2:head:{acme:big}");
        send(3, "m2", &["m2"]).await;
        assert!(is_large(&app), "{kind:?}: large again");
        send(4, "m3", &["m3"]).await;
        assert_counts_four_messages(&app, &format!("{kind:?} cluster {cluster}")).await;
        let report = app.reconcile_all("acme").await;
        assert_eq!(report["drifted"], 0, "{kind:?} cluster {cluster}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// A failover that loses a large conversation's latest message (its
/// primary answered the touch, then failed before the replica had it),
/// after its members caught up with it: the log's next message moves the
/// counter above their records, so they count it. When the counter went
/// on from where the replica had it, the next message took the lost one's
/// value, which the members' records held, and their rows missed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_count_the_message_after_one_a_failover_lost() {
    for cluster in [false, true] {
        let app = app(3, cluster).await;
        let members: Vec<String> = (0..5).map(member).collect();
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        let look = async |seq: u64| {
            for user in &names {
                let row = app.row("acme", user, "big").await.unwrap();
                assert_eq!(row["last_seq"].as_u64(), Some(seq), "cluster {cluster} {user}");
            }
        };
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &names)).await.status, 200);
        assert_eq!(app.touch(message("acme", "big", 2, 1_002, "m1", &["m1"])).await.status, 200);
        look(2).await;
        // What the replica holds of the conversation's keys.
        let conversation = "un:v2:head:{acme:big}";
        let mut redis = app.holder(conversation).connection().unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{conversation}*")).query(&mut redis).unwrap();
        let replica: Vec<(String, Vec<u8>)> = keys
            .into_iter()
            .map(|key| (key.clone(), redis::cmd("DUMP").arg(&key).query(&mut redis).unwrap()))
            .collect();
        assert_eq!(app.touch(message("acme", "big", 3, 1_003, "m2", &["m2"])).await.status, 200);
        look(3).await;
        // The failover: the conversation's keys are the replica's again.
        let now: Vec<String> = redis::cmd("KEYS").arg(format!("{conversation}*")).query(&mut redis).unwrap();
        for key in now {
            let _: u64 = redis::cmd("DEL").arg(&key).query(&mut redis).unwrap();
        }
        for (key, value) in &replica {
            let _: () = redis::cmd("RESTORE").arg(key).arg(0).arg(value.as_slice()).query(&mut redis).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(app.touch(message("acme", "big", 4, 1_004, "m3", &["m3"])).await.status, 200);
        assert_counts_four_messages(&app, &format!("cluster {cluster}")).await;
    }
}

/// A reconcile reads the truth, and a large conversation's message can be
/// stored and touched before its rewrite runs: the members' states catch up
/// with that message, so they differ from the truth it read. The rewrite
/// keeps the message counted, in the state and in the event it publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reconcile_that_read_the_truth_before_a_large_groups_message_keeps_it_counted() {
    for (kind, cluster) in KINDS.into_iter().flat_map(|kind| [(kind, false), (kind, true)]) {
        let store = MessageStore::create(kind).await;
        let app = app_with_store(Some(&store), cluster).await;
        made_large_in_store(&store, &app, 5, &format!("{kind:?} cluster {cluster}")).await;
        // Message 2 reaches Redis while the truth a reconcile reads does not
        // hold it yet (the reconcile read it just before the app stored it).
        let second = message("acme", "big", 2, 1_002, "m1", &["m1"]);
        assert_eq!(app.touch(second.clone()).await.status, 200, "{kind:?} cluster {cluster}");
        let mut events = Events::subscribe(&app, "acme");
        app.reconcile_all("acme").await;
        let events = events.take();
        for user in ["m2", "m3", "m4"] {
            let row = app.row("acme", user, "big").await.unwrap();
            assert_eq!(
                (row["unread"].as_u64(), row["last_seq"].as_u64()),
                (Some(2), Some(2)),
                "{kind:?} cluster {cluster} {user}"
            );
            assert_eq!(
                app.badge("acme", user).await.body["total"].as_u64(),
                Some(2),
                "{kind:?} cluster {cluster} {user}"
            );
            for event in events.iter().filter(|e| e["user"] == user) {
                assert_eq!(event["badge"]["total"], 2, "{kind:?} cluster {cluster} {user}: {event}");
            }
        }
        // The app stores the message: the truth and Redis agree.
        store.store_message("acme", "big", 2, 1_002, "m1", &second["preview"].to_string()).await;
        let report = app.reconcile_all("acme").await;
        assert_eq!(report["drifted"], 0, "{kind:?} cluster {cluster}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// A message that comes while a reconcile runs is no drift, whichever step
/// it meets: stored before the truth is read and touched after the rewrite
/// (the truth is ahead of Redis), or stored after the read and touched
/// before the rewrite (a large conversation's members catch up with it
/// there, and Redis is ahead of the truth, with no version moved). The
/// reconcile reads the truth again a moment later for users whose state
/// and truth differ in a conversation's last message, and reports nothing.
/// Each round sends one message (stored, then touched, as the app does) at
/// a random moment early in a reconcile (without the second read, a third
/// of the rounds reported drift).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reconcile_racing_a_large_groups_messages_reports_no_drift() {
    const ROUNDS: u64 = 40;
    for (kind, cluster) in [(KINDS[1], false), (KINDS[0], true)] {
        let store = MessageStore::create(kind).await;
        let app = std::sync::Arc::new(app_with_store(Some(&store), cluster).await);
        let members = made_large_in_store(&store, &app, 40, &format!("{kind:?} cluster {cluster}")).await;
        let started = std::time::Instant::now();
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?} cluster {cluster}");
        let reconcile_takes = started.elapsed();
        let mut rng = StdRng::seed_from_u64(11);
        for seq in 2..2 + ROUNDS {
            // Early in the reconcile: its truth is read within its first
            // quarter, by how long a whole one took.
            let delay = reconcile_takes.mul_f64(rng.random_range(0.0..0.25));
            let sender = app.clone();
            let reconcile = tokio::spawn(async move { sender.reconcile_all("acme").await });
            tokio::time::sleep(delay).await;
            let body = message("acme", "big", seq, 1_000 + seq, "m1", &["m1"]);
            store.store_message("acme", "big", seq, 1_000 + seq, "m1", &body["preview"].to_string()).await;
            assert_eq!(app.touch(body).await.status, 200, "{kind:?} cluster {cluster}");
            let report = reconcile.await.unwrap();
            assert_eq!(report["drifted"], 0, "{kind:?} cluster {cluster} message {seq}: {report}");
            assert_eq!(report["checked"], members.len(), "{kind:?} cluster {cluster}: {report}");
        }
        // Every member counts every message but the ones it sent.
        for user in ["m1", "m2", "m39"] {
            let row = app.row("acme", user, "big").await.unwrap();
            let unread = if user == "m1" { 0 } else { 1 + ROUNDS };
            assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(unread), Some(1 + ROUNDS)), "{user}");
        }
        drop(app);
        store.drop_database().await;
    }
}

/// A large conversation's log keeps its newest 1 024 recalls and @all
/// mentions. A member further behind than that is owed entries the log
/// dropped: with a SQL store the member is rebuilt from the truth, which
/// holds them, so every number stays exact: a list, a badge, a message that
/// names the member, its event. (Both SQL stores, one Redis and a cluster.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_further_behind_than_the_log_keeps_is_counted_from_the_truth() {
    const RECALLS: u64 = 1_030;
    const LAST: u64 = 2_000;
    for (kind, cluster) in [(KINDS[0], false), (KINDS[1], true)] {
        let store = MessageStore::create(kind).await;
        let app = app_with_store(Some(&store), cluster).await;
        let members: Vec<String> = (0..5).map(member).collect();
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        store.create_conversation("acme", "big", "chat", &members).await;
        let send = async |body: Value| {
            let seq = body["seq"].as_u64().unwrap();
            let sender = body["sender"].as_str().unwrap_or("m0").to_string();
            store.store_message("acme", "big", seq, 1_000 + seq, &sender, &body["preview"].to_string()).await;
            assert_eq!(app.touch(body).await.status, 200, "{kind:?} cluster {cluster}");
        };
        send(message("acme", "big", 1, 1_001, "m0", &names)).await;
        assert!(is_large(&app), "{kind:?} cluster {cluster}");
        send(message("acme", "big", LAST, 1_000 + LAST, "m0", &["m0"])).await;
        assert_eq!(app.mark_read("acme", "m1", "big", 1).await.status, 200);
        for user in ["m1", "m4"] {
            assert!(app.row("acme", user, "big").await.is_some(), "{kind:?} cluster {cluster} {user} caught up");
        }
        // More recalls than the log keeps, while m1..m4 read nothing.
        for seq in 2..2 + RECALLS {
            assert_eq!(app.recall("acme", "big", seq, &["m0"], None).await.status, 200, "{kind:?} recall {seq}");
        }
        let log = app.redis.sorted_set("un:v2:head:{acme:big}:group");
        let entries = log.iter().filter(|(entry, _)| entry.starts_with('r')).count();
        assert_eq!(entries, 1_024, "{kind:?} cluster {cluster}: the log keeps its newest entries");
        assert_eq!(log.first().map(|(entry, _)| entry.as_str()), Some("~"), "{kind:?}: it tells what it dropped");

        let mut events = Events::subscribe(&app, "acme");
        for (user, unread) in [("m1", LAST - 1 - RECALLS), ("m4", LAST - RECALLS)] {
            let row = app.row("acme", user, "big").await.unwrap();
            assert_eq!(row["unread"].as_u64(), Some(unread), "{kind:?} cluster {cluster} {user}: {row}");
            assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(unread), "{kind:?} {user}");
        }
        assert_eq!(app.badge("acme", "m3").await.body["total"].as_u64(), Some(LAST - RECALLS), "{kind:?} m3");
        // A message that names m2 (mentioned) writes m2 from the truth too.
        let mut body = message("acme", "big", LAST + 1, 1_001 + LAST, "m0", &["m0", "m2"]);
        body["mentions"] = json!(["m2"]);
        send(body).await;
        let unread = LAST + 1 - RECALLS;
        let row = app.row("acme", "m2", "big").await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["mentions"].as_u64()), (Some(unread), Some(1)), "{kind:?} m2: {row}");
        let events = events.take();
        let told: Vec<&Value> = events.iter().filter(|e| e["user"] == "m2").collect();
        assert!(!told.is_empty(), "{kind:?} cluster {cluster}: {events:?}");
        for event in told {
            assert_eq!(event["badge"]["total"], unread, "{kind:?} cluster {cluster}: {event}");
        }
        let report = app.reconcile_all("acme").await;
        assert_eq!(report["drifted"], 0, "{kind:?} cluster {cluster}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// A member new to a large group's log, named first by a late message (one
/// older than the head), is owed the recalls and @all mentions that came
/// after it; when the log dropped entries, some of those may be gone, so
/// with a SQL store the member is counted from the truth, which holds them
/// all. (One Redis and a cluster, whose members' round is given the log.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_new_to_a_trimmed_log_named_by_a_late_message_is_counted_from_the_truth() {
    const RECALLS: u64 = 1_030;
    const LAST: u64 = 2_000;
    for cluster in [false, true] {
        let store = MessageStore::create(Kind::Postgres).await;
        let app = app_with_store(Some(&store), cluster).await;
        made_large_in_store(&store, &app, 5, "trimmed").await;
        let send = async |body: Value| {
            let (seq, ts) = (body["seq"].as_u64().unwrap(), body["ts"].as_u64().unwrap());
            let conversation = body["conversation"].as_str().unwrap().to_string();
            store.store_message("acme", &conversation, seq, ts, "m0", &body["preview"].to_string()).await;
            assert_eq!(app.touch(body).await.status, 200, "cluster {cluster}");
        };
        send(message("acme", "big", LAST, 1_000 + LAST, "m0", &["m0"])).await;
        for seq in 2..2 + RECALLS {
            assert_eq!(app.recall("acme", "big", seq, &["m0"], None).await.status, 200, "recall {seq}");
        }
        let log = app.redis.sorted_set("un:v2:head:{acme:big}:group");
        assert_eq!(log.first().map(|(entry, _)| entry.as_str()), Some("~"), "the log dropped entries");

        // Members with state in Redis (another conversation each) join the
        // group in the app; the first message that names them is an old one.
        // (Several: on a cluster some are beside the head, the others in the
        // members' round.)
        let late: Vec<String> = (0..6).map(|n| format!("x{n}")).collect();
        store.create_conversation("acme", "cx", "chat", &late).await;
        let named: Vec<&str> = late.iter().map(String::as_str).collect();
        send(message("acme", "cx", 1, 900, "m0", &named)).await;
        for user in &late {
            store.add_member("acme", "big", user).await;
        }
        let mut named = named.clone();
        named.push("m0");
        send(message("acme", "big", 1_500, 1_100, "m0", &named)).await;
        for user in &late {
            let row = app.row("acme", user, "big").await.unwrap();
            let numbers = (row["last_seq"].as_u64(), row["unread"].as_u64());
            assert_eq!(numbers, (Some(LAST), Some(LAST - RECALLS)), "cluster {cluster} {user}: {row}");
            let total = app.badge("acme", user).await.body["total"].as_u64();
            assert_eq!(total, Some(LAST - RECALLS + 1), "cluster {cluster} {user}");
        }
        let report = app.reconcile_all("acme").await;
        assert_eq!(report["drifted"], 0, "cluster {cluster}: {report}");
        drop(app);
        store.drop_database().await;
    }
}

/// A member who joins while the group is still small, after the app built
/// the message that makes it large (so that message does not name them),
/// counts that message and every one after it, from the answer on; one who
/// joined and left again does not get the conversation back. Cache-only on
/// one Redis and on a cluster, and with a SQL store.
#[tokio::test]
async fn a_member_who_joined_just_before_the_group_became_large_counts_its_messages() {
    for (kind, cluster) in [(None, false), (None, true), (Some(KINDS[0]), false)] {
        let store = match kind {
            Some(kind) => Some(MessageStore::create(kind).await),
            None => None,
        };
        let app = app_with_store(store.as_ref(), cluster).await;
        let case = format!("{kind:?} cluster {cluster}");
        let everyone: Vec<String> = ["m0", "m1", "m2", "m3", "x", "y"].map(String::from).to_vec();
        if let Some(store) = &store {
            store.create_conversation("acme", "big", "chat", &everyone).await;
        }
        let send = async |body: Value| {
            if let Some(store) = &store {
                let (seq, sender) = (body["seq"].as_u64().unwrap(), body["sender"].as_str().unwrap().to_string());
                store.store_message("acme", "big", seq, 1_000 + seq, &sender, &body["preview"].to_string()).await;
            }
            assert_eq!(app.touch(body).await.status, 200, "{case}");
        };
        send(message("acme", "big", 1, 1_001, "m0", &["m0", "m1", "m2"])).await;
        assert!(!is_large(&app), "{case}: three members are not past the threshold");
        // x and y join after message 1; y leaves again (the app drops them).
        assert_eq!(app.join("acme", "big", 1, &["x", "y"]).await.status, 200, "{case}");
        assert_eq!(app.leave("acme", "big", &["y"]).await.status, 200, "{case}");
        if let Some(store) = &store {
            store.remove_member("acme", "big", "y").await;
        }
        let unread = |row: Option<Value>| row.and_then(|r| r["unread"].as_u64());
        // x uses unread meanwhile: it has the conversation, with nothing unread.
        assert_eq!(unread(app.row("acme", "x", "big").await), Some(0), "{case}: x after joining");
        // The app built message 2 before they joined: it names four members,
        // not x, and makes the group large.
        send(message("acme", "big", 2, 1_002, "m0", &["m0", "m1", "m2", "m3"])).await;
        assert!(is_large(&app), "{case}");
        assert_eq!(unread(app.row("acme", "x", "big").await), Some(1), "{case}: x counts message 2");
        assert_eq!(app.badge("acme", "x").await.body["total"], 1, "{case}");
        // Later messages name only their sender, as in any large group.
        send(message("acme", "big", 3, 1_003, "m1", &["m1"])).await;
        for (user, expected) in [("x", 2), ("m2", 3), ("m3", 3)] {
            assert_eq!(unread(app.row("acme", user, "big").await), Some(expected), "{case}: {user}");
            assert_eq!(app.badge("acme", user).await.body["total"], expected, "{case}: {user}");
        }
        assert_eq!(app.row("acme", "y", "big").await, None, "{case}: y left before");
        assert_eq!(app.badge("acme", "y").await.body["total"], 0, "{case}: y");
        assert!(
            !app.redis.keys().iter().any(|key| key.ends_with(":joined")),
            "{case}: the joiners' record went with the message that made the group large"
        );
        if let Some(store) = store {
            let report = app.reconcile_all("acme").await;
            assert_eq!(report["drifted"], 0, "{case}: {report}");
            drop(app);
            store.drop_database().await;
        }
    }
}

/// A member who joined and left again before the group became large, and
/// whose keys then went (idle long enough to expire; the tombstone of the
/// leave with them), does not get the conversation back from the message
/// that makes it large: leaving forgot them as a joiner. Cache-only, where
/// nothing but Redis says who left; on one Redis and on a cluster.
#[tokio::test]
async fn a_joiner_who_left_and_whose_keys_expired_is_not_brought_back_by_the_group_growing_large() {
    for cluster in [false, true] {
        let app = app_with_store(None, cluster).await;
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &["m0", "m1", "m2"])).await.status, 200);
        assert_eq!(app.join("acme", "big", 1, &["x", "y"]).await.status, 200, "cluster {cluster}");
        assert_eq!(app.leave("acme", "big", &["y"]).await.status, 200, "cluster {cluster}");
        // y stays away until its keys expire, the leave's tombstone too.
        app.redis.expire_user("acme", "y");
        assert!(!app.redis.keys().iter().any(|key| key.contains("{acme:y}")), "cluster {cluster}");
        // The app built message 2 before x and y joined: it names neither.
        assert_eq!(app.touch(message("acme", "big", 2, 1_002, "m0", &["m0", "m1", "m2", "m3"])).await.status, 200);
        assert!(is_large(&app), "cluster {cluster}");
        assert_eq!(app.touch(message("acme", "big", 3, 1_003, "m1", &["m1"])).await.status, 200);
        let unread = |row: Option<Value>| row.and_then(|r| r["unread"].as_u64());
        assert_eq!(unread(app.row("acme", "x", "big").await), Some(2), "cluster {cluster}: x, who stayed");
        assert_eq!(app.row("acme", "y", "big").await, None, "cluster {cluster}: y left");
        assert_eq!(app.badge("acme", "y").await.body["total"], 0, "cluster {cluster}: y");
    }
}

/// A touch that makes the group large and is answered 503 before it made a
/// member who joined just before a member of its log (here: that member's
/// node hangs) hands that member over again when the app retries it, so the
/// member counts the message once the retry is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_joiner_handed_over_by_a_touch_answered_503_is_handed_over_again_by_its_retry() {
    let app = app_with_store(None, true).await;
    let cluster = app.cluster.as_ref().unwrap();
    let head = cluster.primary_of("un:v2:head:{acme:big}");
    // A joiner whose keys live on another node than the head's.
    let joiner = (0..)
        .map(|i| format!("x{i}"))
        .find(|user| !std::sync::Arc::ptr_eq(cluster.primary_of(&format!("un:v2:{{acme:{user}}}:conv")), head))
        .unwrap();
    let hung = cluster.primary_of(&format!("un:v2:{{acme:{joiner}}}:conv")).clone();
    assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &["m0", "m1", "m2"])).await.status, 200);
    assert_eq!(app.join("acme", "big", 1, &[joiner.as_str()]).await.status, 200);
    let unread = |row: Option<Value>| row.and_then(|r| r["unread"].as_u64());
    assert_eq!(unread(app.row("acme", &joiner, "big").await), Some(0), "after joining");
    // The app built message 2 before the member joined: it does not name
    // them, and makes the group large.
    let second = message("acme", "big", 2, 1_002, "m0", &["m0", "m1", "m2", "m3"]);
    hung.pause();
    let answer = app.touch(second.clone()).await;
    hung.resume();
    assert_eq!(answer.status, 503, "{:?}", answer.body);
    cluster.wait_until_settled();
    assert!(is_large(&app), "the head took the message before the touch failed");
    // The app retries a touch answered 503.
    let answer = app.touch(second).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(unread(app.row("acme", &joiner, "big").await), Some(1), "the joiner counts message 2");
    assert_eq!(app.badge("acme", &joiner).await.body["total"], 1);
    assert!(
        !app.redis.keys().iter().any(|key| key.ends_with(":joined")),
        "the joiner is forgotten as one once a member of the log"
    );
    assert_eq!(app.touch(message("acme", "big", 3, 1_003, "m1", &["m1"])).await.status, 200);
    assert_eq!(app.badge("acme", &joiner).await.body["total"], 2, "and counts the next one");
}

/// On a cluster, a touch whose members are each in many large conversations
/// reads each of those conversations' logs once for all of them (not once
/// per member), and every member's badge counts them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_a_touch_reads_each_large_groups_log_once() {
    const GROUPS: usize = 20;
    let app =
        App::with(Setup { variables: vec![("large_group_threshold", "40".into())], cluster: true, ..Setup::default() })
            .await;
    let members: Vec<String> = (0..30).map(member).collect();
    let fillers: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    let everyone: Vec<&str> = members.iter().chain(&fillers).map(String::as_str).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    for g in 0..GROUPS {
        let answer = app.touch(message("acme", &format!("g{g}"), 1, 1_000 + g as u64, "f0", &everyone)).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    assert_eq!(app.touch(message("acme", "small", 1, 3_000, "m0", &names)).await.status, 200);
    for g in 0..GROUPS {
        let answer = app.touch(message("acme", &format!("g{g}"), 2, 2_000 + g as u64, "f1", &["f1"])).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    let before = app.redis.scripts_run();
    assert_eq!(app.touch(message("acme", "small", 2, 3_001, "m0", &names)).await.status, 200);
    let scripts = app.redis.scripts_run() - before;
    // The head's round, the members' parts twice (asking for the logs, then
    // with them), the tenant's clocks (one script per clock key, at most
    // 16), the logs once per large conversation that moved, and the
    // cache-only data set's check that now and then goes beside a call (per
    // member and conversation, it would be 30 times 20).
    let bound = 2 + 2 * members.len() + 16 + GROUPS;
    assert!(scripts <= bound as u64, "{scripts} scripts for one touch (at most {bound})");
    for (user, total) in [("m0", 2 * GROUPS), ("m1", 2 * GROUPS + 2), ("m29", 2 * GROUPS + 2)] {
        assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(total as u64), "{user}");
    }
}

/// A push gateway gets one event for a large conversation's message, which
/// names no user, and asks `POST /v1/badges` for its members: each badge is
/// what that member's own `GET /v1/badge` answers, in the order asked, on
/// one Redis, on a cluster, and with a SQL store for members Redis never
/// loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_push_gateway_gets_the_badges_of_a_large_groups_members() {
    for (cluster, sql) in [(false, None), (true, None), (false, Some(crate::store::Kind::Postgres))] {
        let store = match sql {
            Some(kind) => Some(MessageStore::create(kind).await),
            None => None,
        };
        let app = app_with_store(store.as_ref(), cluster).await;
        let members: Vec<String> = (0..6).map(member).collect();
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        if let Some(store) = &store {
            store.create_conversation("acme", "big", "chat", &members).await;
            store.create_conversation("acme", "side", "chat", &["m1".to_string(), "m2".to_string()]).await;
        }
        let send = async |conversation: &str, seq: u64, sender: &str, named: &[&str]| {
            let touch = message("acme", conversation, seq, 1_000 + seq, sender, named);
            if let Some(store) = &store {
                store
                    .store_message("acme", conversation, seq, 1_000 + seq, sender, &touch["preview"].to_string())
                    .await;
            }
            assert_eq!(app.touch(touch).await.status, 200);
        };
        send("big", 1, "m0", &names).await;
        send("side", 1, "m1", &["m1", "m2"]).await;
        assert_eq!(app.mark_read("acme", "m3", "big", 1).await.status, 200);
        if store.is_some() {
            // Redis lost everything: the members are loaded from the truth by
            // the gateway's call.
            app.redis.flush_all();
        }
        let mut events = Events::subscribe(&app, "acme");
        send("big", 2, "m5", &["m5"]).await;
        let told: Vec<Value> = events.take().into_iter().filter(|e| e["user"].is_null()).collect();
        assert_eq!(told.len(), 1, "cluster {cluster}, {sql:?}: {told:?}");
        let mut asked = names.clone();
        asked.reverse();
        asked.push("stranger");
        let answer = app.badges("acme", &asked).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        let badges = answer.body["badges"].as_array().unwrap().clone();
        assert_eq!(badges.len(), asked.len());
        for (user, mut badge) in asked.iter().zip(badges) {
            assert_eq!(badge["user"], *user);
            badge.as_object_mut().unwrap().remove("user");
            let mut own = app.badge("acme", user).await.body;
            if store.is_some() && *user != "m5" && *user != "stranger" {
                // Not loaded since Redis lost them (m5 was, by its message):
                // the gateway's call read them from SQL, all at once, and
                // loaded them, so their own call is Redis's.
                assert_eq!((badge["source"].as_str(), own["source"].as_str()), (Some("sql"), Some("redis")), "{user}");
            }
            for answer in [&mut badge, &mut own] {
                // The first read of a user Redis never had comes from SQL.
                answer.as_object_mut().unwrap().remove("source");
            }
            assert_eq!(badge, own, "cluster {cluster}, {sql:?}: {user}");
        }
        let total = |i: usize| badges_total(&answer.body, i);
        // m0 sent 1; m3 read 1; m5 sent 2; m1 and m2 have side too (m1 sent it).
        assert_eq!(
            (0..asked.len()).map(total).collect::<Vec<_>>(),
            [0, 2, 1, 3, 2, 1, 0],
            "cluster {cluster}, {sql:?}"
        );
        drop(app);
        if let Some(store) = store {
            store.drop_database().await;
        }
    }
}

fn badges_total(answer: &Value, i: usize) -> u64 {
    answer["badges"][i]["total"].as_u64().unwrap()
}

/// Events carry seqs and counts to the last digit, up to 2^53 - 1: a
/// conversation's event its message's seq, a member's event its unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_carry_seqs_and_counts_to_the_last_digit() {
    const LAST: u64 = (1 << 53) - 1;
    let app = app(3, false).await;
    let members: Vec<String> = (0..5).map(member).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut events = Events::subscribe(&app, "acme");
    assert_eq!(app.touch(message("acme", "big", LAST - 2, 1_000, "m0", &names)).await.status, 200);
    assert_eq!(app.touch(message("acme", "small", LAST, 1_001, "m0", &["m0", "m1"])).await.status, 200);
    let events = events.take();
    let large: Vec<&Value> = events.iter().filter(|e| e["user"].is_null()).collect();
    assert_eq!(large.len(), 1, "{events:?}");
    assert_eq!(large[0]["seq"].as_u64(), Some(LAST - 2), "{}", large[0]);
    let m1 = events.iter().rfind(|e| e["user"] == "m1").unwrap();
    assert_eq!(m1["unread"].as_u64(), Some(LAST), "{m1}");
    assert_eq!(m1["badge"]["total"].as_u64(), Some(LAST + LAST - 2), "{m1}");
}

/// A message that makes the group large races a member's leave: whichever
/// lands first, the one who left stays out (no row, nothing in the badge,
/// no membership of the log), and every member sees what an app writing
/// every member shows after the message and then the leave. Each order, and
/// both at once, on one Redis and on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leave_racing_the_message_that_makes_the_group_large_keeps_every_number() {
    for cluster in [false, true] {
        let raced = app_with_store(None, cluster).await;
        let every =
            App::with(Setup { variables: vec![("large_group_threshold", "0".into())], cluster, ..Setup::default() })
                .await;
        let five = ["m0", "m1", "m2", "m3", "m4"];
        for round in 0..12 {
            let conversation = format!("big{round}");
            let touch = |seq: u64, sender: &str, members: &[&str]| {
                message("acme", &conversation, seq, 1_000 * round + seq, sender, members)
            };
            for app in [&raced, &every] {
                assert_eq!(app.touch(touch(1, "m0", &five[..3])).await.status, 200);
            }
            // Five named at once: the group becomes large, as m2 leaves (in
            // turn before, after, and at the same time).
            let crossing = raced.touch(touch(2, "m0", &five));
            let leaving = raced.leave("acme", &conversation, &["m2"]);
            let (touched, left) = match round % 3 {
                0 => {
                    let left = leaving.await;
                    (crossing.await, left)
                }
                1 => {
                    let touched = crossing.await;
                    (touched, leaving.await)
                }
                _ => tokio::join!(crossing, leaving),
            };
            assert_eq!((touched.status, left.status), (200, 200), "cluster {cluster}, round {round}");
            assert_eq!(every.touch(touch(2, "m0", &five)).await.status, 200);
            assert_eq!(every.leave("acme", &conversation, &["m2"]).await.status, 200);
            // A message of the large group names its sender alone.
            assert_eq!(raced.touch(touch(3, "m1", &["m1"])).await.status, 200);
            assert_eq!(every.touch(touch(3, "m1", &["m0", "m1", "m3", "m4"])).await.status, 200);
            let record = raced.redis.stored("un:v2:{acme:m2}:groups", &conversation);
            assert_eq!(record, None, "cluster {cluster}, round {round}: m2 left, yet is a member of the log");
            for user in five {
                let (got, wanted) = tokio::join!(seen(&raced, user), seen(&every, user));
                assert_eq!(got, wanted, "cluster {cluster}, round {round}: {user}");
            }
        }
        assert!(raced.redis.keys().iter().any(|key| key == "un:v2:head:{acme:big11}:group"), "cluster {cluster}");
    }
}

/// A message to a small group writes each member, first caught up with the
/// large groups it is in, and the event it publishes for each member
/// carries a badge that counts them, however far each member was behind:
/// here members who share two large groups, each caught up to a different
/// message of them (one never), get one message of a small group together.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_small_groups_message_counts_the_large_groups_each_member_is_behind_in() {
    for cluster in [false, true] {
        let app = app(3, cluster).await;
        let everyone = ["m0", "m1", "m2", "m3", "m4"];
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &everyone)).await.status, 200);
        assert_eq!(app.touch(message("acme", "wide", 1, 1_002, "m4", &everyone[1..])).await.status, 200);
        for (seq, caller) in [(2, "m1"), (3, "m2"), (4, "")] {
            assert_eq!(app.touch(message("acme", "big", seq, 1_000 + 2 * seq, "m0", &["m0"])).await.status, 200);
            if !caller.is_empty() {
                assert_eq!(app.badge("acme", caller).await.status, 200, "{caller} catches up to message {seq}");
            }
        }
        assert_eq!(app.touch(message("acme", "wide", 2, 1_010, "m4", &["m4"])).await.status, 200);
        let mut events = Events::subscribe(&app, "acme");
        let small = message("acme", "trio", 1, 1_020, "m1", &["m1", "m2", "m3"]);
        assert_eq!(app.touch(small).await.status, 200);
        let events = events.take();
        // big: 4 unread for each; wide: 2; the small group's message: 1,
        // read by its sender (who is told of it by the answer, not an event).
        for (user, total) in [("m2", 7), ("m3", 7)] {
            let told = events.iter().rfind(|e| e["user"] == user && e["conversation"] == "trio");
            let told = told.unwrap_or_else(|| panic!("cluster {cluster}: no event for {user}: {events:?}"));
            assert_eq!(told["badge"]["total"].as_u64(), Some(total), "cluster {cluster}: {user}'s event {told}");
        }
        for (user, total) in [("m1", 6), ("m2", 7), ("m3", 7)] {
            assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(total), "cluster {cluster}: {user}");
        }
    }
}

/// A message to a large group that names a member new to it, arriving after
/// a newer message (late, or sent again after a 503): the member counts
/// the newer message and its @all mention too, as in order. (One Redis and
/// a cluster, where the members' round reads the log from the head's slot.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_named_first_by_a_late_message_counts_what_came_after_it() {
    for cluster in [false, true] {
        let app = app(3, cluster).await;
        let first: Vec<&str> = vec!["m0", "m1", "m2", "m3", "m4"];
        assert_eq!(app.touch(message("acme", "big", 1, 1_001, "m0", &first)).await.status, 200);
        let mut newer = message("acme", "big", 3, 1_003, "m1", &["m1"]);
        newer["mention_all"] = json!(true);
        assert_eq!(app.touch(newer).await.status, 200);
        // Several new members: on a cluster some are beside the head, the
        // others in the members' round.
        let late: Vec<String> = (0..8).map(|n| format!("x{n}")).collect();
        let mut named = vec!["m0"];
        named.extend(late.iter().map(String::as_str));
        assert_eq!(app.touch(message("acme", "big", 2, 1_002, "m0", &named)).await.status, 200);
        for user in &late {
            let row = app.row("acme", user, "big").await.unwrap();
            let numbers = (row["last_seq"].as_u64(), row["unread"].as_u64(), row["mentions"].as_u64());
            assert_eq!(numbers, (Some(3), Some(3), Some(1)), "cluster {cluster} {user}: {row}");
        }
        // In order, the same.
        let mut newer = message("acme", "big", 5, 1_005, "m1", &["m1"]);
        newer["mention_all"] = json!(true);
        assert_eq!(app.touch(message("acme", "big", 4, 1_004, "m0", &["m0", "y"])).await.status, 200);
        assert_eq!(app.touch(newer).await.status, 200);
        let row = app.row("acme", "y", "big").await.unwrap();
        let numbers = (row["last_seq"].as_u64(), row["unread"].as_u64(), row["mentions"].as_u64());
        assert_eq!(numbers, (Some(5), Some(5), Some(1)), "cluster {cluster}: {row}");
    }
}

/// A large group's message that a rebuild writes into the head before its
/// touch comes (a reconcile read the store between the app's write and its
/// touch) is announced by its touch, once: the rebuild cannot tell a
/// message on its way from one announced before Redis lost it, and
/// announces neither; the touch finds the head moved and the rebuild's note.
#[tokio::test]
async fn a_large_message_a_rebuild_brings_before_its_touch_is_announced_once() {
    for cluster in [false, true] {
        let store = MessageStore::create(Kind::Postgres).await;
        let app = app_with_store(Some(&store), cluster).await;
        let members = made_large_in_store(&store, &app, 5, "rebuild first").await;
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        let mut events = Events::subscribe(&app, "acme");
        let second = message("acme", "big", 2, 1_002, "m0", &names[..1]);
        store.store_message("acme", "big", 2, 1_002, "m0", &second["preview"].to_string()).await;
        let report = app.reconcile(json!({"tenant": "acme", "users": ["m1"]})).await;
        assert_eq!(report.status, 200, "cluster {cluster}: {:?}", report.body);
        assert_eq!(announced(&events.take(), 2), 0, "cluster {cluster}: the rebuild announced it");
        let noted = || app.redis.keys().iter().any(|key| key == "un:v2:head:{acme:big}:unannounced");
        assert!(noted(), "cluster {cluster}: the rebuild left no note for the touch");
        assert_eq!(app.row("acme", "m1", "big").await.unwrap()["unread"], 2, "cluster {cluster}");
        assert_eq!(app.touch(second.clone()).await.status, 200);
        assert_eq!(announced(&events.take(), 2), 1, "cluster {cluster}: its touch announced it");
        assert!(!noted(), "cluster {cluster}: the note stayed after the event");
        assert_eq!(app.touch(second).await.status, 200);
        assert_eq!(announced(&events.take(), 2), 0, "cluster {cluster}: the touch sent again announced it");
        assert_eq!(app.badge("acme", "m3").await.body["total"], 2, "cluster {cluster}");
        drop(app);
        store.drop_database().await;
    }
}

/// A Redis that lost a large group cannot tell whether its last message was
/// announced, and it was: the members' rebuilds write it into the head
/// again from the store and announce nothing (else a push gateway would
/// tell every member of the group of it a second time). Each member's
/// number is the store's all along; the next message is announced once.
#[tokio::test]
async fn a_large_groups_last_message_is_not_announced_again_after_redis_lost_it() {
    for cluster in [false, true] {
        let store = MessageStore::create(Kind::Postgres).await;
        let app = app_with_store(Some(&store), cluster).await;
        let members = made_large_in_store(&store, &app, 5, "lost").await;
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        let mut events = Events::subscribe(&app, "acme");
        send_stored(&store, &app, 2, "m0", &names[..1]).await;
        assert_eq!(announced(&events.take(), 2), 1, "cluster {cluster}: the message's touch announced it");

        app.redis.flush_all();
        for member in &members {
            let row = app.row("acme", member, "big").await.unwrap();
            let unread = if member == "m0" { 0 } else { 2 };
            assert_eq!(row["unread"], unread, "cluster {cluster}: {member} after the loss: {row}");
        }
        let after_the_loss = events.take();
        assert_eq!(announced(&after_the_loss, 2), 0, "cluster {cluster}: announced again: {after_the_loss:?}");
        assert!(is_large(&app), "cluster {cluster}: large again from the store");

        send_stored(&store, &app, 3, "m1", &names[1..2]).await;
        assert_eq!(announced(&events.take(), 3), 1, "cluster {cluster}: the next message");
        assert_eq!(app.badge("acme", "m3").await.body["total"], 3, "cluster {cluster}");
        assert_eq!(app.row("acme", "m1", "big").await.unwrap()["unread"], 0, "cluster {cluster}");
        drop(app);
        store.drop_database().await;
    }
}

/// How many of `events` announce the large group "big"'s message `seq`.
fn announced(events: &[Value], seq: u64) -> usize {
    events.iter().filter(|e| e["conversation"] == "big" && e["large"] == true && e["seq"] == seq).count()
}
