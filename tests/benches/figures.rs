//! `cargo bench --profile tools -p unread-tests`: prints throughput, latency percentiles,
//! Redis round trips and connections per call, answer bytes and Redis memory
//! per user — the composed components served by the host, against a private
//! redis-server. Loopback only; bounded request counts.

#[path = "../api/support.rs"]
#[allow(dead_code)]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Answer, App, SERVICE_TOKEN, Setup, jwt, message};
use unread_host::InstanceMode;

const CONCURRENCY: usize = 16;
const USERS: usize = 1_000;
const GROUP: usize = 20;

/// What one phase measured.
struct Figures {
    name: String,
    calls: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    bytes: usize,
    commands: u64,
    opens: u64,
}

impl Figures {
    fn print(&self) {
        let pct = |p: f64| {
            let i = ((self.latencies.len() as f64 * p).ceil() as usize).clamp(1, self.latencies.len()) - 1;
            self.latencies[i].as_secs_f64() * 1000.0
        };
        println!(
            "{:<34} {:>7} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>9.3} {:>8}",
            self.name,
            self.calls,
            self.calls as f64 / self.elapsed.as_secs_f64(),
            pct(0.50),
            pct(0.95),
            pct(0.99),
            self.commands as f64 / self.calls as f64,
            self.opens as f64 / self.calls as f64,
            self.bytes / self.calls,
        );
    }
}

/// Runs `calls` requests made by `request(i)`, CONCURRENCY at a time.
async fn phase<F, Fut>(app: &Arc<App>, name: &str, calls: usize, request: F) -> Figures
where
    F: Fn(Arc<App>, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Answer> + Send,
{
    let request = Arc::new(request);
    let before = app.redis_stats();
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..CONCURRENCY {
        let (app, request) = (app.clone(), request.clone());
        workers.push(tokio::spawn(async move {
            let mut out = (Vec::new(), 0usize);
            for i in (worker..calls).step_by(CONCURRENCY) {
                let t = Instant::now();
                let answer = request(app.clone(), i).await;
                assert_eq!(answer.status, 200, "{:?}", answer.body);
                out.0.push(t.elapsed());
                out.1 += answer.length;
            }
            out
        }));
    }
    let mut latencies = Vec::new();
    let mut bytes = 0;
    for worker in workers {
        let (l, b) = worker.await.unwrap();
        latencies.extend(l);
        bytes += b;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let after = app.redis_stats();
    Figures {
        name: name.into(),
        calls,
        elapsed,
        latencies,
        bytes,
        commands: after.commands - before.commands,
        opens: after.opens - before.opens,
    }
}

fn group_of(i: usize) -> Vec<String> {
    (0..GROUP).map(|k| format!("u{}", (i * 7 + k * 50) % USERS)).collect()
}

async fn run(instances: InstanceMode, label: &str) {
    let app = Arc::new(App::with(Setup { instances, ..Setup::default() }).await);
    println!("\n== {label}: {CONCURRENCY} concurrent keep-alive clients, {USERS} users, groups of {GROUP}");
    println!(
        "{:<34} {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "call", "calls", "rps", "p50 ms", "p95 ms", "p99 ms", "redis/op", "opens/op", "bytes"
    );
    let touches = phase(&app, "touch (group of 20)", 4_000, |app, i| async move {
        let members = group_of(i % 200);
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        app.touch(message(
            "bench",
            &format!("g{}", i % 200),
            1 + (i / 200) as u64,
            1_764_460_800_000 + i as u64,
            members[0],
            &members,
        ))
        .await
    })
    .await;
    touches.print();
    phase(&app, "touch (group of 500)", 200, |app, i| async move {
        let members: Vec<String> = (0..500).map(|k| format!("u{k}")).collect();
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        app.touch(message("bench", "big", 1 + i as u64, 1_764_460_900_000 + i as u64, "u0", &members)).await
    })
    .await
    .print();
    flood_pending_mentions(&app).await;
    phase(&app, "touch (500, 10 000 @all unread)", 200, |app, i| async move {
        let members: Vec<String> = (0..500).map(|k| format!("u{k}")).collect();
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        let mut touch = message("bench", "flood", 10_002 + i as u64, 1_764_461_000_000 + i as u64, "u0", &members);
        touch["mention_all"] = json!(true);
        app.touch(touch).await
    })
    .await
    .print();
    phase(&app, "mark-read", 4_000, |app, i| async move {
        app.mark_read("bench", &format!("u{}", i % USERS), &format!("g{}", i % 200), 1 + (i % 10) as u64).await
    })
    .await
    .print();
    phase(&app, "list (20 per page)", 4_000, |app, i| async move {
        app.list("bench", &format!("u{}", i % USERS), "limit=20").await
    })
    .await
    .print();
    phase(&app, "badge", 4_000, |app, i| async move { app.badge("bench", &format!("u{}", i % USERS)).await })
        .await
        .print();
    phase(&app, "mute / unmute", 4_000, |app, i| async move {
        let body = json!({"muted": (i / 500) % 2 == 0}).to_string();
        app.send("POST", "/v1/conversations/big/mute", Some(jwt("bench", &format!("u{}", i % 500))), Some(body)).await
    })
    .await
    .print();
    phase(&app, "recall (one member)", 4_000, |app, i| async move {
        let body = json!({"tenant": "bench", "conversation": "big", "seq": 1 + (i / 500) % 200, "members": [format!("u{}", i % 500)]});
        app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
    })
    .await
    .print();

    let mut redis = app.redis.connection().unwrap();
    let info: String = redis::cmd("INFO").arg("memory").query(&mut redis).unwrap();
    let used: u64 = info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap();
    let keys: u64 = redis::cmd("DBSIZE").query(&mut redis).unwrap();
    let sample = app.redis.keys().into_iter().filter(|k| k.starts_with("un:v2:{bench:u7}:")).collect::<Vec<_>>();
    let mut per_user = 0u64;
    for key in &sample {
        let bytes: u64 = redis::cmd("MEMORY").arg("USAGE").arg(key).query(&mut redis).unwrap();
        per_user += bytes;
    }
    let encodings: Vec<String> = sample
        .iter()
        .map(|k| {
            format!(
                "{}={}",
                k.rsplit_once("}:").unwrap().1,
                redis::cmd("OBJECT").arg("ENCODING").arg(k).query::<String>(&mut redis).unwrap()
            )
        })
        .collect();
    kept_cursor_bytes(&app).await;
    let conversations = app.whole_list("bench", "u7", 100).await.len();
    println!(
        "redis: {keys} keys, {:.1} MiB used; user u7: {conversations} conversations in {} keys, {per_user} bytes ({})",
        used as f64 / 1048576.0,
        sample.len(),
        encodings.join(", ")
    );
}

/// 500 members who each have 10 000 unread @all mentions in "flood": one
/// real touch, then the 10 000 mentions written straight into each member's
/// marks (as 10 000 touches would leave them), so that the next touches
/// show what pending mentions cost a touch.
async fn flood_pending_mentions(app: &App) {
    let members: Vec<String> = (0..500).map(|k| format!("u{k}")).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut touch = message("bench", "flood", 10_001, 1_764_460_999_000, "u0", &names);
    touch["mention_all"] = json!(true);
    assert_eq!(app.touch(touch).await.status, 200);
    let mut redis = app.redis.connection().unwrap();
    for member in &members[1..] {
        let prefix = format!("un:v2:{{bench:{member}}}:");
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(format!("{prefix}marks"));
        for seq in 1..=10_000u64 {
            zadd.arg(0).arg(format!("flood\0m{seq:016}"));
        }
        let _: () = zadd.query(&mut redis).unwrap();
        let value: String = redis::cmd("HGET").arg(format!("{prefix}conv")).arg("flood").query(&mut redis).unwrap();
        let (_, rest) = value.split_once(':').unwrap();
        let (read, rest) = rest.split_once(':').unwrap();
        let (_, rest) = rest.split_once(':').unwrap();
        let (recalled, rest) = rest.split_once(':').unwrap();
        let (_, rest) = rest.split_once(':').unwrap();
        let value = format!("10001:{read}:10001:{recalled}:k:{rest}");
        let _: () = redis::cmd("HSET").arg(format!("{prefix}conv")).arg("flood").arg(value).query(&mut redis).unwrap();
        let _: () =
            redis::cmd("HINCRBY").arg(format!("{prefix}badge")).arg("chat:@").arg(10_000).query(&mut redis).unwrap();
    }
    let u1 = app.whole_list("bench", "u1", 100).await;
    let flood = u1.iter().find(|r| r["id"] == "flood").unwrap();
    assert_eq!((flood["unread"].as_u64(), flood["mentions"].as_u64()), (Some(10_001), Some(10_001)), "{flood}");
}

/// Memory per kept cursor: a user in 300 one-to-one conversations keeps 100
/// listed and 200 with their cursors.
async fn kept_cursor_bytes(app: &App) {
    for i in 0..300u64 {
        let peer = format!("p{i}");
        app.touch(message("bench", &format!("h{i}"), 1, 1_764_470_000_000 + i, &peer, &["heavy", &peer])).await;
        app.mark_read("bench", "heavy", &format!("h{i}"), 1).await;
    }
    let mut redis = app.redis.connection().unwrap();
    let mut bytes = 0u64;
    for key in ["kept", "kept:age"] {
        let usage: u64 =
            redis::cmd("MEMORY").arg("USAGE").arg(format!("un:v2:{{bench:heavy}}:{key}")).query(&mut redis).unwrap();
        bytes += usage;
    }
    let kept: u64 = redis::cmd("HLEN").arg("un:v2:{bench:heavy}:kept").query(&mut redis).unwrap();
    println!(
        "kept cursors: a user with {kept} kept beyond the list uses {bytes} bytes for them, {} per kept cursor",
        bytes / kept.max(1)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    run(InstanceMode::spin_default(), "instance reused (Spin 4.1 default: 128 requests, 16 at once)").await;
    run(InstanceMode::PerRequest, "fresh instance per request").await;
}
