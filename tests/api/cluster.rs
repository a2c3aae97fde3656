//! Redis Cluster: the same answers as one Redis, with every call sent in
//! parts to the primaries that own their slots (one call per primary),
//! through slot moves and a failover. (The randomized history runs on a cluster too: history.rs.)

use serde_json::{Value, json};

use crate::support::{App, RedisServer, Setup, assert_walked_every_user, jwt, message, unread_by_conversation};

async fn cluster_app() -> App {
    App::with(Setup { cluster: true, ..Setup::default() }).await
}

fn members(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("u{i}")).collect()
}

/// Every call of the API on a cluster: a group whose members live on every
/// primary, its list, badge, settings, recall, join, leave, delete and a
/// category clear that walks every primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_call_answers_on_a_cluster_as_on_one_redis() {
    let app = cluster_app().await;
    let cluster = app.cluster.as_ref().unwrap();
    let group = members(12);
    let names: Vec<&str> = group.iter().map(String::as_str).collect();
    for seq in 1..=3 {
        let mut body = message("acme", "g", seq, 1_000 + seq, "u0", &names);
        if seq == 2 {
            body["mentions"] = json!(["u5"]);
        }
        let answer = app.touch(body).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    // The members' keys are spread over every primary: the touch was split.
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    for primary in &primaries {
        assert!(primary.keys().iter().any(|k| k.starts_with("un:v2:{acme:u")), "a primary holds no member");
    }
    for user in &names[1..] {
        let row = app.row("acme", user, "g").await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(3), Some(3)), "{user}: {row}");
        assert_eq!(row["preview"]["text"], "message 3", "{user}");
        assert_eq!(row["mentions"].as_u64(), Some(u64::from(*user == "u5")), "{user}");
    }
    assert_eq!(app.row("acme", "u0", "g").await.unwrap()["unread"].as_u64(), Some(0), "the sender read it");

    // A category conflict is refused before any part writes.
    let mut other = message("acme", "g", 4, 1_004, "u0", &names);
    other["category"] = json!("system");
    assert_eq!(app.touch(other).await.status, 409);
    assert_eq!(app.row("acme", "u7", "g").await.unwrap()["last_seq"].as_u64(), Some(3), "nothing written");

    // Reads and settings.
    let read = app.mark_read("acme", "u3", "g", 2).await;
    assert_eq!((read.status, read.body["unread"].as_u64()), (200, Some(1)), "{:?}", read.body);
    let muted = app.flag("acme", "u4", "g", "mute", json!({"muted": true})).await;
    assert_eq!(muted.status, 200, "{:?}", muted.body);
    assert_eq!(app.badge("acme", "u4").await.body["muted"].as_u64(), Some(3));
    assert_eq!(app.badge("acme", "u6").await.body["total"].as_u64(), Some(3));

    // Recall of the last message: one fewer, a new preview, for every member.
    let recalled = app.recall("acme", "g", 3, &names, Some(json!({"text": "recalled"}))).await;
    assert_eq!(recalled.status, 200, "{:?}", recalled.body);
    for user in &names[1..] {
        let row = app.row("acme", user, "g").await.unwrap();
        assert_eq!(row["preview"]["text"], "recalled", "{user}");
    }
    assert_eq!(unread_by_conversation(&app, "acme", "u6").await["g"], 2);

    // Join: newcomers on every primary are listed at once at the head.
    let newcomers = ["n1", "n2", "n3", "n4", "n5", "n6"];
    assert_eq!(app.join("acme", "g", 3, &newcomers).await.status, 200);
    for user in newcomers {
        let row = app.row("acme", user, "g").await.unwrap_or_else(|| panic!("{user} is not listed"));
        assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(0), Some(3)), "{user}");
        assert_eq!(row["preview"]["text"], "recalled", "{user}");
    }
    let mut everyone = names.clone();
    everyone.extend(newcomers);
    assert_eq!(app.touch(message("acme", "g", 4, 1_004, "u0", &everyone)).await.status, 200);
    assert_eq!(unread_by_conversation(&app, "acme", "n4").await["g"], 1);

    // Leave.
    assert_eq!(app.leave("acme", "g", &["u8", "n2"]).await.status, 200);
    assert!(app.row("acme", "u8", "g").await.is_none());
    assert!(app.row("acme", "n2", "g").await.is_none());

    // A category clear that walks the tenant's users on every primary.
    let mut cursor = Value::Null;
    let mut cleared = 0;
    loop {
        let body = json!({"tenant": "acme", "category": "chat", "all_users": true, "cursor": cursor});
        let answer = app.service("/v1/admin/clear-category", body).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        cleared += answer.body["users"].as_u64().unwrap();
        cursor = answer.body["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert!(cleared >= 14, "every member with unread was cleared: {cleared}");
    for user in ["u1", "u6", "n4"] {
        assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(0), "{user}");
    }

    // Delete: every member's row and the conversation's keys go.
    let deleted = app.delete_conversation("acme", "g", &everyone).await;
    assert_eq!(deleted.status, 200, "{:?}", deleted.body);
    for user in ["u1", "u6", "n4"] {
        assert!(app.row("acme", user, "g").await.is_none(), "{user}");
    }
    // The node redis_url names looks at every primary's keys.
    let keys = app.redis.keys();
    assert!(!keys.iter().any(|k| k.starts_with("un:v2:head:")), "{keys:?}");
}

/// Drops a conversation's head wherever it is (as its time to live would),
/// leaving its members' states.
fn drop_head(app: &App, conversation: &str) {
    let key = format!("un:v2:head:{{acme:{conversation}}}");
    let mut dropped = 0;
    for primary in app.cluster.as_ref().unwrap().primaries() {
        // Only the owner takes it; the others answer MOVED.
        dropped += redis::cmd("DEL").arg(&key).query::<i64>(&mut primary.connection().unwrap()).unwrap_or(0);
    }
    assert_eq!(dropped, 1, "{key}");
}

/// A touch on a cluster is checked by the conversation's head first: a
/// message of another category than the head's is refused before anything
/// is written; without a head, every part is checked before any part
/// writes; and a member state older than the head takes the head's category
/// with its badge moved out of the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_head_vouches_for_a_touchs_category() {
    let app = cluster_app().await;
    let group = members(9);
    let names: Vec<&str> = group.iter().map(String::as_str).collect();
    let mut first = message("acme", "h", 1, 1_000, "u0", &names);
    first["category"] = json!("system");
    assert_eq!(app.touch(first).await.status, 200);
    let cluster = app.cluster.as_ref().unwrap();
    let heads_primary = cluster.primary_of("{acme:h}").port;
    let beside_head = names[1..].iter().filter(|u| cluster.primary_of(&format!("{{acme:{u}}}")).port == heads_primary);
    assert!(beside_head.count() > 0, "no member goes in the head's call");

    // The head refuses another category; no member is written, not even
    // those its call carries.
    let refused = app.touch(message("acme", "h", 2, 1_002, "u0", &names)).await;
    assert_eq!(refused.status, 409, "{:?}", refused.body);
    for user in &names[1..] {
        assert_eq!(app.row("acme", user, "h").await.unwrap()["last_seq"].as_u64(), Some(1), "{user}");
    }

    // Without its head, a member's own category still refuses the message,
    // and nobody else is written.
    drop_head(&app, "h");
    let newcomer_and_member = ["v1", "v2", "v3", "u4"];
    let refused = app.touch(message("acme", "h", 2, 1_002, "v1", &newcomer_and_member)).await;
    assert_eq!(refused.status, 409, "{:?}", refused.body);
    for user in ["v1", "v2", "v3"] {
        assert!(app.row("acme", user, "h").await.is_none(), "{user} was written");
    }
    assert_eq!(app.row("acme", "u4", "h").await.unwrap()["last_seq"].as_u64(), Some(1));

    // A new head in another category (its members had none), then a message
    // that names a member from before it: the member follows the head, and
    // its badge moves from the old category to the new one.
    assert_eq!(app.touch(message("acme", "h", 2, 1_002, "v1", &["v1", "v2"])).await.status, 200);
    assert_eq!(app.touch(message("acme", "h", 3, 1_003, "v1", &["v1", "v2", "u4"])).await.status, 200);
    let row = app.row("acme", "u4", "h").await.unwrap();
    assert_eq!((row["category"].as_str(), row["unread"].as_u64()), (Some("chat"), Some(3)), "{row}");
    let badge = app.badge("acme", "u4").await.body;
    assert_eq!(badge["total"].as_u64(), Some(3), "{badge}");
    assert_eq!(badge["categories"], json!({"chat": 3}), "{badge}");
    assert_eq!(unread_by_conversation(&app, "acme", "v2").await["h"], 3);
}

/// A list page reads its rows' previews from heads on every primary, and
/// puts them back in the rows' order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_page_gets_each_rows_preview_from_its_own_primary() {
    let app = cluster_app().await;
    for i in 0..30u64 {
        let conversation = format!("c{i}");
        let mut body = message("acme", &conversation, 1, 2_000 + i, "x", &["x", "me"]);
        body["preview"] = json!({"text": format!("in {conversation}")});
        assert_eq!(app.touch(body).await.status, 200);
    }
    let rows = app.whole_list("acme", "me", 7).await;
    assert_eq!(rows.len(), 30);
    for (i, row) in rows.iter().enumerate() {
        let conversation = format!("c{}", 29 - i);
        assert_eq!(row["id"], conversation.as_str());
        assert_eq!(row["preview"]["text"], format!("in {conversation}"));
    }
    let badge = app.send("GET", "/v1/badge", Some(jwt("acme", "me")), None).await;
    assert_eq!(badge.body["total"].as_u64(), Some(30));
}

/// A touch of a group whose members live on every primary sends one
/// script per primary, not one per member's slot: the parts of the slots
/// one node serves go as one call, and the members the head's primary
/// serves go with the head's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_groups_members_are_written_by_one_script_per_primary() {
    let app = cluster_app().await;
    let cluster = app.cluster.as_ref().unwrap();
    let group = members(30);
    let names: Vec<&str> = group.iter().map(String::as_str).collect();
    assert_eq!(app.touch(message("acme", "g", 1, 1_001, "u0", &names)).await.status, 200);
    for primary in cluster.primaries() {
        let members_here = names.iter().filter(|u| cluster.primary_of(&format!("{{acme:{u}}}")).port == primary.port);
        assert!(members_here.count() >= 3, "members spread over every primary");
    }
    let before = app.redis.scripts_run();
    assert_eq!(app.touch(message("acme", "g", 2, 1_002, "u0", &names)).await.status, 200);
    let scripts = app.redis.scripts_run() - before;
    // The head's script with its primary's members, then one per other
    // primary for theirs.
    assert_eq!(scripts, 1 + 2, "scripts for one message to 30 members");
    for user in &names[1..] {
        assert_eq!(app.row("acme", user, "g").await.unwrap()["unread"].as_u64(), Some(2), "{user}");
    }
}

/// A user's badge whose large conversations did not move since the user
/// caught up runs its script once: the first run, which asks for their
/// logs, also answers as if none moved, and the clocks say none did. Once
/// a message moved one, that answer is not taken: the log is read and the
/// script runs again, and the answer counts the message. (A list page asks
/// and runs again: a page answered in vain costs more than a badge, and a
/// user's large conversations have mostly moved between two pages.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_badge_whose_large_conversations_did_not_move_runs_its_script_once() {
    let app =
        App::with(Setup { cluster: true, variables: vec![("large_group_threshold", "3".into())], ..Setup::default() })
            .await;
    let group = members(6);
    let names: Vec<&str> = group.iter().map(String::as_str).collect();
    // Recent messages: a page reads their heads with plain reads, no script.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for (at, conversation) in ["big", "other"].into_iter().enumerate() {
        let body = message("acme", conversation, 1, now - 9_000 + at as u64, "u0", &names);
        assert_eq!(app.touch(body).await.status, 200);
    }
    assert_eq!(app.touch(message("acme", "dm", 1, now - 8_000, "u1", &["u1", "u2"])).await.status, 200);
    // The first calls catch u2 up (and open the functions' connections).
    assert_eq!(app.badge("acme", "u2").await.body["total"].as_u64(), Some(3));
    assert_eq!(app.list("acme", "u2", "limit=20").await.status, 200);

    let before = app.redis.scripts_run();
    assert_eq!(app.badge("acme", "u2").await.body["total"].as_u64(), Some(3));
    assert_eq!(app.redis.scripts_run() - before, 1, "scripts for a badge when nothing moved");
    let before = app.redis.scripts_run();
    let page = app.list("acme", "u2", "limit=20").await;
    assert_eq!(app.redis.scripts_run() - before, 2, "scripts for a list page when nothing moved");
    let unread: Vec<(&str, u64)> = page.body["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["id"].as_str().unwrap(), row["unread"].as_u64().unwrap()))
        .collect();
    assert_eq!(unread, [("dm", 1), ("other", 1), ("big", 1)]);

    let moved = message("acme", "big", 2, now - 7_000, "u0", &names);
    assert_eq!(app.touch(moved).await.status, 200);
    let before = app.redis.scripts_run();
    assert_eq!(app.badge("acme", "u2").await.body["total"].as_u64(), Some(4));
    // The first run, the log that moved, the second run.
    assert_eq!(app.redis.scripts_run() - before, 3, "scripts for a badge after a message");
    assert_eq!(app.touch(message("acme", "big", 3, now - 6_000, "u0", &names)).await.status, 200);
    let page = app.list("acme", "u2", "limit=20").await;
    let first = &page.body["conversations"][0];
    assert_eq!((first["id"].as_str(), first["unread"].as_u64()), (Some("big"), Some(3)));
    assert_eq!(first["preview"]["text"], "message 3");
}

/// The parts one node serves go as one call only if the node serves every
/// key of it. A newcomer's slot moved to another primary after the app
/// read the slot map, then another's:
/// - the first on the head's primary: the head's call (it carries the
///   members its primary serves) is turned away before it writes anything,
///   the head's part runs alone, and the newcomer's part, which follows
///   `MOVED` away from the head, hands its member to the members' round;
/// - the second on another primary: the members' call is turned away, and
///   each slot's part is sent on its own, the moved one following `MOVED`.
///
/// Every member is written once, the moved ones where their slots are.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_for_one_node_that_names_a_key_it_no_longer_serves_is_sent_slot_by_slot() {
    let app = cluster_app().await;
    let cluster = app.cluster.as_ref().unwrap();
    let group = members(30);
    let mut names: Vec<&str> = group.iter().map(String::as_str).collect();
    assert_eq!(app.touch(message("acme", "g", 1, 1_001, "u0", &names)).await.status, 200);
    let head = cluster.primary_of("{acme:g}").clone();
    let slot_of = |user: &str| head.command::<u16>(&["CLUSTER", "KEYSLOT", &format!("{{acme:{user}}}")]).to_string();
    let head_slot = head.command::<u16>(&["CLUSTER", "KEYSLOT", "{acme:g}"]).to_string();
    let on_heads = |user: &str| cluster.primary_of(&format!("{{acme:{user}}}")).port == head.port;
    // Newcomers whose slots hold nothing yet (a slot moves here without its
    // keys), each with another newcomer to compare with.
    let newcomers: Vec<String> = (0..400).map(|i| format!("x{i}")).collect();
    let unused = |user: &str| {
        let slot = slot_of(user);
        let node = cluster.primary_of(&format!("{{acme:{user}}}"));
        slot != head_slot && node.command::<u64>(&["CLUSTER", "COUNTKEYSINSLOT", &slot]) == 0
    };
    let beside = newcomers.iter().find(|u| on_heads(u) && unused(u)).unwrap().as_str();
    let apart = newcomers.iter().find(|u| !on_heads(u) && unused(u) && slot_of(u) != slot_of(beside)).unwrap().as_str();
    let others: Vec<&str> = newcomers.iter().map(String::as_str).filter(|u| ![beside, apart].contains(u)).collect();
    for (seq, (moved, still)) in [(beside, others[0]), (apart, others[1])].into_iter().enumerate() {
        let seq = seq as u64 + 2;
        let from = cluster.primary_of(&format!("{{acme:{moved}}}")).clone();
        let to = cluster.primaries().into_iter().find(|p| p.port != from.port).unwrap().clone();
        let slot = slot_of(moved);
        for primary in cluster.primaries() {
            let _: () = primary.command(&["CLUSTER", "SETSLOT", &slot, "NODE", &cluster.id(&to)]);
        }
        let (elsewhere, redirected) = (from.errors("ELSEWHERE"), from.errors("MOVED"));

        names.extend([moved, still]);
        let answer = app.touch(message("acme", "g", seq, 1_000 + seq, "u0", &names)).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        let keys_in = |node: &RedisServer| node.command::<u64>(&["CLUSTER", "COUNTKEYSINSLOT", &slot]);
        assert!(from.errors("ELSEWHERE") > elsewhere, "{moved}: the call for its old node was not turned away");
        assert!(from.errors("MOVED") > redirected, "{moved}: its part was not redirected");
        assert_eq!(keys_in(&from), 0, "{moved}: written where its slot was");
        assert!(keys_in(&to) > 0, "{moved}: not written where its slot is");
        let expected = app.row("acme", still, "g").await.unwrap();
        assert_eq!(app.row("acme", moved, "g").await.unwrap(), expected, "{moved}");
        assert_eq!(app.badge("acme", moved).await.body["total"], expected["unread"], "{moved}");
        for user in &names[1..30] {
            assert_eq!(app.row("acme", user, "g").await.unwrap()["unread"].as_u64(), Some(seq), "{user}");
        }
    }
}

/// Slots move (a reshard) and a primary fails over while members read and
/// write: every answer is the right number or a clean 503, and once things
/// settle every number is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn numbers_stay_right_through_a_reshard_and_a_failover() {
    let app = std::sync::Arc::new(cluster_app().await);
    let group = members(20);
    let names: Vec<&str> = group.iter().map(String::as_str).collect();
    let disrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (app, group, disrupted) = (app.clone(), group.clone(), disrupted.clone());
        tokio::spawn(async move {
            let names: Vec<&str> = group.iter().map(String::as_str).collect();
            let (mut seq, mut after) = (0, 0);
            // Until the moves are over, and a few messages more.
            while after < 20 {
                seq += 1;
                loop {
                    let answer = app.touch(message("acme", "g", seq, 10_000 + seq, "u0", &names)).await;
                    match answer.status {
                        200 => break,
                        503 => {
                            assert_eq!(answer.body["error"]["code"], "unavailable", "{:?}", answer.body);
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        }
                        status => panic!("touch answered {status}: {:?}", answer.body),
                    }
                }
                if disrupted.load(std::sync::atomic::Ordering::SeqCst) {
                    after += 1;
                }
            }
            seq
        })
    };
    let disrupter = {
        let (app, disrupted) = (app.clone(), disrupted.clone());
        tokio::task::spawn_blocking(move || {
            let cluster = app.cluster.as_ref().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
            let primaries = cluster.primaries();
            cluster.reshard(primaries[0], primaries[1], 2000);
            let primaries = cluster.primaries();
            cluster.fail_over(primaries[2]);
            disrupted.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    // A reader that never sees a number go backwards or past what was sent.
    let mut seen = std::collections::HashMap::new();
    while !writer.is_finished() {
        for user in ["u3", "u11", "u17"] {
            let answer = app.list("acme", user, "limit=5").await;
            if answer.status == 503 {
                assert_eq!(answer.body["error"]["code"], "unavailable", "{:?}", answer.body);
                continue;
            }
            assert_eq!(answer.status, 200, "{:?}", answer.body);
            let Some(row) = answer.body["conversations"].as_array().and_then(|rows| rows.first()) else { continue };
            let unread = row["unread"].as_u64().unwrap();
            assert_eq!(unread, row["last_seq"].as_u64().unwrap(), "{user}: {row}");
            let before = seen.insert(user, unread).unwrap_or(0);
            assert!(unread >= before, "{user}: {before} unread, then {unread}");
        }
    }
    let sent = writer.await.unwrap();
    disrupter.await.unwrap();
    // The app was redirected, and followed.
    let cluster = app.cluster.as_ref().unwrap();
    let count = |code: &str| -> u64 { cluster.nodes.iter().map(|node| node.errors(code)).sum() };
    let redirects = count("MOVED") + count("ASK");
    println!("{sent} messages; MOVED {}, ASK {}, TRYAGAIN {}", count("MOVED"), count("ASK"), count("TRYAGAIN"));
    assert!(redirects > 0, "no MOVED or ASK: the slots did not move under the app");
    for user in &names[1..] {
        let row = app.row("acme", user, "g").await.unwrap();
        assert_eq!(row["unread"].as_u64(), Some(sent), "{user}: {row}");
        assert_eq!(app.badge("acme", user).await.body["total"].as_u64(), Some(sent), "{user}");
    }
}

/// A walk over every primary (a category clear of all users) while a
/// primary and its replica are down, on a cluster that goes on serving
/// the other slots (`cluster-require-full-coverage no`), is a 503: it does
/// not pass over that primary's users and say it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_walk_while_a_primary_is_down_is_unavailable_not_done() {
    let app = App::with(Setup { cluster: true, ..Setup::default() }).await;
    let cluster = app.cluster.as_ref().unwrap();
    let members: Vec<String> = (0..12).map(|i| format!("u{i}")).collect();
    let named: Vec<&str> = members.iter().map(String::as_str).collect();
    assert_eq!(app.touch(message("acme", "c1", 1, 1_001, "u0", &named)).await.status, 200);
    for node in &cluster.nodes {
        let _: () = node.command(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
    }
    let seed_port = cluster.nodes[0].port;
    let down = cluster.primaries().into_iter().find(|p| p.port != seed_port).expect("another primary").clone();
    let replica = cluster.replica_of(&down).clone();
    down.kill();
    replica.kill();
    let failed = |port: u16| {
        let nodes: String = cluster.nodes[0].command(&["CLUSTER", "NODES"]);
        nodes.lines().any(|l| l.contains(&format!("127.0.0.1:{port}@")) && l.contains("fail") && !l.contains("fail?"))
    };
    for _ in 0..400 {
        if failed(down.port) && failed(replica.port) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(failed(down.port), "the cluster never marked the primary failed");

    let mut cursor = Value::Null;
    let answer = loop {
        let body = json!({"tenant": "acme", "category": "chat", "all_users": true, "cursor": cursor});
        let answer = app.service("/v1/admin/clear-category", body).await;
        if answer.status != 200 {
            break answer;
        }
        cursor = answer.body["next_cursor"].clone();
        assert!(!cursor.is_null(), "the walk said it was done without a primary's users: {:?}", answer.body);
    };
    assert_eq!((answer.status, &answer.body["error"]["code"]), (503, &json!("unavailable")), "{:?}", answer.body);
}

/// A walk over every primary (a category clear of all users) while slots
/// move between its pages, from a primary it has not walked yet to one it
/// has: it starts again rather than pass over the users that moved, and
/// every user ends cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_walk_while_slots_move_passes_over_no_user() {
    let app = cluster_app().await;
    let cluster = app.cluster.as_ref().unwrap();
    let users = members(600);
    for (at, group) in users.chunks(75).enumerate() {
        let mut named: Vec<&str> = group.iter().map(String::as_str).collect();
        named.push("s");
        let answer = app.touch(message("acme", &format!("g{at}"), 1, 1_000, "s", &named)).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    // The walk's order: the primaries by address.
    let mut primaries = cluster.primaries();
    primaries.sort_by_key(|node| format!("127.0.0.1:{}", node.port));

    // While a primary is moving a slot out, its keys go one batch at a time:
    // a walk waits (503) until the slot settles.
    let nodes: String = primaries[1].command(&["CLUSTER", "NODES"]);
    let myself = nodes.lines().find(|line| line.contains("myself")).unwrap();
    let range = myself.split_whitespace().nth(8).unwrap();
    let slot = range.split('-').next().unwrap();
    let _: () = primaries[1].command(&["CLUSTER", "SETSLOT", slot, "MIGRATING", &cluster.id(primaries[0])]);
    let body = json!({"tenant": "acme", "category": "chat", "all_users": true});
    let answer = app.service("/v1/admin/clear-category", body.clone()).await;
    assert_eq!((answer.status, &answer.body["error"]["code"]), (503, &json!("unavailable")), "{:?}", answer.body);
    let _: () = primaries[1].command(&["CLUSTER", "SETSLOT", slot, "STABLE"]);

    let mut cursor = Value::Null;
    let mut moved = false;
    let mut calls = 0;
    loop {
        let body = json!({"tenant": "acme", "category": "chat", "all_users": true, "cursor": cursor});
        let answer = app.service("/v1/admin/clear-category", body).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        cursor = answer.body["next_cursor"].clone();
        calls += 1;
        let Some(text) = cursor.as_str() else { break };
        if !moved && !text.starts_with("0.") {
            // Past the first primary: the last one's users move into it.
            cluster.reshard(primaries[2], primaries[0], 2_000);
            moved = true;
        }
        assert!(calls < 50, "the walk never ended");
    }
    assert!(moved, "the walk ended before it passed the first primary");
    assert_walked_every_user(&app, &users).await;
}
