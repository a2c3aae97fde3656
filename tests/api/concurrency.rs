//! Counting under concurrency: a phone clearing while messages
//! arrive never loses a count, and the badge always equals the sum of the
//! list, checked against a model computed from sequence numbers.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::Mutex;

use crate::support::{App, assert_badge_consistent, message, unread_by_conversation};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clearing_while_messages_arrive_never_loses_a_count() {
    let app = Arc::new(App::start().await);
    let last = 60u64;
    let acked = Arc::new(Mutex::new(0u64));
    let mut tasks = Vec::new();
    for seq in 1..=last {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let answer = app.touch(message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"])).await;
            assert_eq!(answer.status, 200);
        }));
    }
    for device in 0..3u64 {
        let (app, acked) = (app.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..15 {
                // A device acks the newest message it has seen in the list.
                let rows = app.whole_list("acme", "u2", 20).await;
                let seen = rows.first().map_or(0, |r| r["last_seq"].as_u64().unwrap()).saturating_sub(device);
                if seen == 0 {
                    continue;
                }
                let read = app.mark_read("acme", "u2", "c1", seen).await.body;
                assert!(read["read_seq"].as_u64().unwrap() >= seen);
                let mut acked = acked.lock().await;
                *acked = (*acked).max(seen);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let acked = *acked.lock().await;
    let unread = unread_by_conversation(&app, "acme", "u2").await["c1"];
    assert_eq!(unread, last - acked, "acked up to {acked}");
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, last - acked);
}

/// What the state must be, from sequence numbers alone.
#[derive(Default)]
struct Model {
    /// (user, conversation) -> (last_seq, read_seq)
    cursors: HashMap<(String, String), (u64, u64)>,
}

impl Model {
    fn touch(&mut self, conversation: &str, seq: u64, sender: &str, members: &[String]) {
        for member in members {
            let entry = self.cursors.entry((member.clone(), conversation.to_string())).or_default();
            entry.0 = entry.0.max(seq);
            if member == sender {
                entry.1 = entry.1.max(seq);
            }
        }
    }

    fn mark_read(&mut self, user: &str, conversation: &str, seq: u64) {
        let entry = self.cursors.entry((user.to_string(), conversation.to_string())).or_default();
        entry.1 = entry.1.max(seq);
    }

    fn unread(&self, user: &str) -> HashMap<String, u64> {
        self.cursors
            .iter()
            .filter(|((u, _), (last, _))| u == user && *last > 0)
            .map(|((_, c), (last, read))| (c.clone(), last.saturating_sub(*read)))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_badge_is_the_sum_of_the_list_under_any_interleaving() {
    let app = Arc::new(App::start().await);
    let users: Vec<String> = (0..6).map(|i| format!("u{i}")).collect();
    let conversations: Vec<(String, Vec<String>, &str)> = (0..8)
        .map(|i| {
            let members = users.iter().filter(|u| i % 2 == 0 || u.as_str() < "u3").cloned().collect();
            (format!("c{i}"), members, if i % 3 == 0 { "system" } else { "chat" })
        })
        .collect();
    let model = Arc::new(Mutex::new(Model::default()));
    let mut tasks = Vec::new();
    for client in 0..8u64 {
        let (app, model, conversations) = (app.clone(), model.clone(), conversations.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(client);
            for _ in 0..40 {
                let (conversation, members, category) = &conversations[rng.random_range(0..conversations.len())];
                let user = &members[rng.random_range(0..members.len())];
                match rng.random_range(0..10) {
                    0..=4 => {
                        let seq = rng.random_range(1..=30);
                        let mut touch = message("acme", conversation, seq, 10_000 + seq, user, &[]);
                        touch["members"] = json!(members);
                        touch["category"] = json!(category);
                        assert_eq!(app.touch(touch).await.status, 200);
                        model.lock().await.touch(conversation, seq, user, members);
                    }
                    5..=7 => {
                        let seq = rng.random_range(1..=30);
                        assert_eq!(app.mark_read("acme", user, conversation, seq).await.status, 200);
                        model.lock().await.mark_read(user, conversation, seq);
                    }
                    _ => {
                        // One script answers page and badge: an atomic snapshot.
                        let page = app.list("acme", user, "limit=100").await.body;
                        let sum: u64 = page["conversations"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| r["unread"].as_u64().unwrap())
                            .sum();
                        assert_eq!(page["badge"]["total"].as_u64(), Some(sum), "{page}");
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let model = model.lock().await;
    for user in &users {
        assert_eq!(unread_by_conversation(&app, "acme", user).await, model.unread(user), "{user}");
        let expected: u64 = model.unread(user).values().sum();
        assert_eq!(assert_badge_consistent(&app, "acme", user).await, expected);
    }
}
