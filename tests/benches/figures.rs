//! `cargo bench --profile tools -p unread-tests`: per function, throughput and
//! latency (p50, p90, p99, max) at 1, 16 and 64 concurrent keep-alive
//! clients, against two ceilings measured in the same run: the no-I/O 404
//! route (what the platform costs) and a native client sending the same
//! Redis scripts with the same arguments straight to Redis (what Redis
//! costs); Redis CPU per call from `INFO commandstats`; what TCP_NODELAY on
//! the host's sockets would change (not Spin's behaviour, see
//! docs/latency.md); Redis memory per user. Loopback only; bounded call
//! counts (a few minutes in all). It prints figures and asserts nothing
//! about time. Name sections to run only those (`-- messages large-reads`;
//! see `main`).

#[path = "../api/support.rs"]
#[allow(dead_code)]
mod support;
#[path = "../api/tokens.rs"]
#[allow(dead_code)]
mod tokens;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Answer, App, REDIS_PASSWORD, SERVICE_TOKEN, Setup, jwt, message};
use tokens::SigningKey;

const LEVELS: [usize; 3] = [1, 16, 64];
const USERS: usize = 1_000;
const GROUP: usize = 20;

/// Latencies and throughput of one phase.
struct Run {
    calls: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Run {
    fn new(calls: usize, elapsed: Duration, mut latencies: Vec<Duration>) -> Run {
        latencies.sort();
        Run { calls, elapsed, latencies }
    }

    fn rps(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    /// The `p` quantile in milliseconds (1.0: the maximum).
    fn ms(&self, p: f64) -> f64 {
        let i = ((self.latencies.len() as f64 * p).ceil() as usize).clamp(1, self.latencies.len()) - 1;
        self.latencies[i].as_secs_f64() * 1000.0
    }

    /// The tables' columns: calls, rps, p50, p90, p99 and max ms.
    fn columns(&self) -> String {
        format!(
            "{:>6} {:>8.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
            self.calls,
            self.rps(),
            self.ms(0.5),
            self.ms(0.9),
            self.ms(0.99),
            self.ms(1.0)
        )
    }
}

/// What the scripts of a phase cost Redis, per call (on a cluster, summed
/// over every primary).
#[derive(Clone, Copy)]
struct RedisCost {
    /// Scripts run per call: a cluster splits a script by slot, and a
    /// member's catch-up there reads clocks and logs in scripts of their own.
    scripts: f64,
    /// Redis CPU per call in those scripts (usec).
    usec: f64,
}

/// Runs `calls` requests made by `request(i)`, `clients` at a time, and
/// what their scripts cost Redis per call.
async fn phase(app: &Arc<App>, clients: usize, calls: usize, request: &Call) -> (Run, RedisCost) {
    let before = app.redis.script_stats();
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..clients {
        let (app, request) = (app.clone(), request.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for i in (worker..calls).step_by(clients) {
                let t = Instant::now();
                let answer = request(app.clone(), i).await;
                assert!(answer.status == 200 || answer.status == 404, "{} {:?}", answer.status, answer.body);
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    let run = Run::new(calls, started.elapsed(), latencies);
    let after = app.redis.script_stats();
    let per_call = |n: u64| n as f64 / calls.max(1) as f64;
    (run, RedisCost { scripts: per_call(after.0 - before.0), usec: per_call(after.1 - before.1) })
}

/// The script commands one call sends, captured with `MONITOR`: the same
/// script (by SHA) with the same keys and arguments.
async fn capture<Fut: std::future::Future<Output = Answer>>(app: &App, call: Fut) -> Vec<Vec<Vec<u8>>> {
    let mut monitor = TcpStream::connect(("127.0.0.1", app.redis.port)).unwrap();
    monitor.write_all(format!("AUTH {REDIS_PASSWORD}\r\nMONITOR\r\n").as_bytes()).unwrap();
    let mut lines = BufReader::new(monitor);
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        lines.read_line(&mut line).unwrap(); // +OK twice
    }
    call.await;
    let marker = "unread-bench-capture-end";
    let _: String = redis::cmd("ECHO").arg(marker).query(&mut app.redis.connection().unwrap()).unwrap();
    let mut commands = Vec::new();
    loop {
        line.clear();
        lines.read_line(&mut line).unwrap();
        let Some(start) = line.find("] ") else { continue };
        let words = monitor_words(&line[start + 2..]);
        match words.first().map(|w| w.to_ascii_uppercase()) {
            Some(w) if w == b"ECHO" && words.get(1).is_some_and(|m| m == marker.as_bytes()) => return commands,
            Some(w) if w == b"EVALSHA" => commands.push(words),
            _ => {}
        }
    }
}

/// The quoted words of a `MONITOR` line (`"EVALSHA" "ab\x00c"`), unescaped.
fn monitor_words(text: &str) -> Vec<Vec<u8>> {
    let bytes = text.trim_end().as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut word = Vec::new();
        while bytes[i] != b'"' {
            if bytes[i] == b'\\' {
                i += 1;
                match bytes[i] {
                    b'n' => word.push(b'\n'),
                    b'r' => word.push(b'\r'),
                    b't' => word.push(b'\t'),
                    b'a' => word.push(7),
                    b'b' => word.push(8),
                    b'x' => {
                        word.push(u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap(), 16).unwrap());
                        i += 2;
                    }
                    other => word.push(other),
                }
            } else {
                word.push(bytes[i]);
            }
            i += 1;
        }
        i += 1;
        words.push(word);
    }
    words
}

/// Sends `commands` (one call's scripts) `calls` times from `clients`
/// native connections straight to Redis.
async fn redis_direct(app: &App, clients: usize, calls: usize, commands: &[Vec<Vec<u8>>]) -> Run {
    let url = app.redis.url();
    let started = Instant::now();
    let mut threads = Vec::new();
    for worker in 0..clients {
        let (url, commands) = (url.clone(), commands.to_vec());
        threads.push(tokio::task::spawn_blocking(move || {
            let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut latencies = Vec::new();
            for _ in (worker..calls).step_by(clients) {
                let t = Instant::now();
                for words in &commands {
                    let mut cmd = redis::cmd(std::str::from_utf8(&words[0]).unwrap());
                    for word in &words[1..] {
                        cmd.arg(word.as_slice());
                    }
                    let _: redis::Value = cmd.query(&mut redis).unwrap();
                }
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for thread in threads {
        latencies.extend(thread.await.unwrap());
    }
    Run::new(calls, started.elapsed(), latencies)
}

/// A message's time: `offset` ms after four hours before the run began,
/// as an app's recent messages are. (On a cluster a list page reads the
/// heads of rows younger than half a head's life with plain reads; older
/// rows take the script that renews their heads.)
fn recent(offset: u64) -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        now.as_millis() as u64 - 4 * 3600 * 1000
    });
    start + offset
}

fn group_of(i: usize) -> Vec<String> {
    (0..GROUP).map(|k| format!("u{}", (i * 7 + k * 50) % USERS)).collect()
}

type Call =
    Arc<dyn Fn(Arc<App>, usize) -> std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>> + Send + Sync>;

fn call<F, Fut>(f: F) -> Call
where
    F: Fn(Arc<App>, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Answer> + Send + 'static,
{
    Arc::new(move |app, i| Box::pin(f(app, i)))
}

/// The calls measured: name, calls per level (1, 16, 64 clients), the call.
/// `round` makes each level's touches newer than the last's.
fn calls(round: u64) -> Vec<(&'static str, [usize; 3], Call)> {
    let base = round * 100_000;
    vec![
        (
            "touch (group of 20)",
            [300, 2_000, 2_000],
            call(move |app, i| async move {
                let members = group_of(i % 200);
                let members: Vec<&str> = members.iter().map(String::as_str).collect();
                let seq = base + 1 + (i / 200) as u64;
                app.touch(message("bench", &format!("g{}", i % 200), seq, recent(seq), members[0], &members)).await
            }),
        ),
        (
            "touch (group of 500)",
            [50, 150, 150],
            call(move |app, i| async move {
                let members: Vec<String> = (0..500).map(|k| format!("u{k}")).collect();
                let members: Vec<&str> = members.iter().map(String::as_str).collect();
                let seq = base + 1 + i as u64;
                app.touch(message("bench", "big", seq, recent(100_000 + seq), "u0", &members)).await
            }),
        ),
        (
            "mark-read",
            [500, 2_000, 2_000],
            call(move |app, i| async move {
                app.mark_read("bench", &format!("u{}", i % USERS), &format!("g{}", i % 200), base + 1 + (i % 10) as u64)
                    .await
            }),
        ),
        (
            "list (20 per page)",
            [500, 2_000, 2_000],
            call(|app, i| async move { app.list("bench", &format!("u{}", i % USERS), "limit=20").await }),
        ),
        (
            "badge",
            [500, 2_000, 2_000],
            call(|app, i| async move { app.badge("bench", &format!("u{}", i % USERS)).await }),
        ),
        (
            "mute / unmute",
            [500, 2_000, 2_000],
            call(|app, i| async move {
                let body = json!({"muted": (i / 500) % 2 == 0}).to_string();
                app.send("POST", "/v1/conversations/big/mute", Some(jwt("bench", &format!("u{}", i % 500))), Some(body))
                    .await
            }),
        ),
        (
            "recall (one member)",
            [500, 2_000, 2_000],
            call(move |app, i| async move {
                let seq = base + 1 + ((i / 500) % 50) as u64;
                let body =
                    json!({"tenant": "bench", "conversation": "big", "seq": seq, "members": [format!("u{}", i % 500)]});
                app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
            }),
        ),
        (
            "404 (no I/O: the platform)",
            [500, 2_000, 2_000],
            call(|app, i| async move { app.send("GET", &format!("/nowhere/{i}"), None, None).await }),
        ),
    ]
}

const HEADER: &str = "call                          calls      rps   p50 ms   p90 ms   p99 ms   max ms | redis rps  redis p50 | fn/404 rps fn/redis rps | redis us/call";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    if wanted("functions") {
        function_table().await;
    }
    if wanted("entries") {
        entry_bytes().await;
    }
    if wanted("messages") {
        message_costs().await;
    }
    if wanted("large-reads") {
        large_group_reads(false).await;
        large_group_reads(true).await;
    }
    if wanted("tokens") {
        token_costs().await;
    }
    if wanted("nodelay") {
        nodelay_comparison().await;
    }
    if wanted("cluster") {
        cluster_comparison().await;
    }
    if wanted("replicas") {
        replica_wait_comparison().await;
    }
    println!("\nwhole run: {:.0} s", started.elapsed().as_secs_f64());
}

/// Whether the command line names `section` (`cargo bench --profile tools
/// -p unread-tests -- messages large-reads`), or names none: then every
/// section runs. (Cargo passes `--bench` itself.)
fn wanted(section: &str) -> bool {
    let named: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    named.is_empty() || named.iter().any(|name| name == section)
}

/// Every function at 1, 16 and 64 clients against the platform's and
/// Redis's ceilings, then Redis memory per user and the touch of a group
/// whose members hold many pending mentions.
async fn function_table() {
    // Every member written, whatever the group's size: read diffusion has
    // figures of its own below.
    let every_member = vec![("large_group_threshold", "0".to_string())];
    let app = Arc::new(App::with(Setup { variables: every_member, ..quiet() }).await);
    println!("\nunread functions served by the host (Spin 4.1's instance reuse), a private redis-server, cache-only;");
    println!("{USERS} users, groups of {GROUP}; keep-alive clients; 'redis' columns: the same scripts with the same");
    println!("arguments sent by a native client straight to Redis; fn/404: rps against the no-I/O route's;");
    println!("every member of a group written (large_group_threshold 0; read diffusion: below).");
    for (level, clients) in LEVELS.iter().copied().enumerate() {
        println!("\n== {clients} client(s)");
        println!("{HEADER}");
        let mut platform_rps = None;
        let mut rows = Vec::new();
        for (name, counts, request) in calls(level as u64) {
            let calls = counts[level];
            let (run, cost) = phase(&app, clients, calls, &request).await;
            let direct = if name.starts_with("404") {
                platform_rps = Some(run.rps());
                None
            } else {
                let commands = capture(&app, request(app.clone(), calls)).await;
                Some(redis_direct(&app, clients, calls, &commands).await)
            };
            rows.push((name, run, direct, cost.usec));
        }
        let platform = platform_rps.unwrap();
        for (name, run, direct, usec) in rows {
            let (redis_rps, redis_p50, over_redis) = match &direct {
                Some(d) => (
                    format!("{:>9.0}", d.rps()),
                    format!("{:>10.3}", d.ms(0.5)),
                    format!("{:>12.2}", run.rps() / d.rps()),
                ),
                None => (format!("{:>9}", "-"), format!("{:>10}", "-"), format!("{:>12}", "-")),
            };
            println!(
                "{name:<28} {} | {redis_rps} {redis_p50} | {:>10.2} {over_redis} | {usec:>13.1}",
                run.columns(),
                run.rps() / platform,
            );
        }
    }

    memory(&app).await;
    flood_pending_mentions(&app).await;
    let flood = call(|app, i| async move {
        let members: Vec<String> = (0..500).map(|k| format!("u{k}")).collect();
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        let mut touch = message("bench", "flood", 10_002 + i as u64, recent(200_000 + i as u64), "u0", &members);
        touch["mention_all"] = json!(true);
        app.touch(touch).await
    });
    let (run, cost) = phase(&app, 16, 150, &flood).await;
    println!(
        "\ntouch of the 500-member group whose members each have 10 000 unread @all mentions, 16 clients: {} calls, {:.0} rps, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms, Redis {:.0} us/call",
        run.calls,
        run.rps(),
        run.ms(0.5),
        run.ms(0.9),
        run.ms(0.99),
        run.ms(1.0),
        cost.usec
    );
}

/// Redis bytes per user-conversation entry: 100 users with 50 conversations
/// each (5 000 entries), one-to-one (2 500 conversations) or in groups of 20
/// (250), for previews of 0, 40 and 100 bytes of text: `MEMORY USAGE` of
/// every key of those users over the entries, and of the conversations'
/// heads (where each preview is stored once) over the conversations.
/// (`MEMORY USAGE` leaves out a key's slots in the key space's and expiry
/// tables: `used_memory` would count them, but moves too much with table
/// growth to give a figure per entry.)
async fn entry_bytes() {
    const PEOPLE: usize = 100;
    const EACH: usize = 50;
    println!("\n== Redis bytes per user-conversation entry ({PEOPLE} users with {EACH} conversations each)");
    let app = Arc::new(App::with(quiet()).await);
    let mut round = 0;
    for size in [2usize, 20] {
        for text_bytes in [0usize, 40, 100] {
            round += 1;
            let tenant = format!("bytes{round}");
            let preview = Arc::new(if text_bytes == 0 { json!({}) } else { json!({"text": "x".repeat(text_bytes)}) });
            let conversations = PEOPLE * EACH / size;
            // One-to-one: user i talks with i+1 ..= i+25 (mod 100). Groups:
            // conversation k holds the 20 users i with i = k (mod 5).
            let members = move |k: usize| -> Vec<String> {
                if size == 2 {
                    let (from, step) = (k / (EACH / 2), 1 + k % (EACH / 2));
                    vec![format!("p{from}"), format!("p{}", (from + step) % PEOPLE)]
                } else {
                    (0..size).map(|j| format!("p{}", k % 5 + 5 * j)).collect()
                }
            };
            let (touch_tenant, touch_preview) = (tenant.clone(), preview.clone());
            let touch = call(move |app, k| {
                let members = members(k);
                let members: Vec<&str> = members.iter().map(String::as_str).collect();
                let ts = recent(k as u64);
                let mut body = message(&touch_tenant, &format!("d{k}"), 1, ts, members[0], &members);
                body["preview"] = (*touch_preview).clone();
                async move { app.touch(body).await }
            });
            let _ = phase(&app, 16, conversations, &touch).await;
            let mut redis = app.redis.connection().unwrap();
            let mut usage = |pattern: String| {
                let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut redis).unwrap();
                let bytes: u64 = keys
                    .iter()
                    .map(|key| {
                        redis::cmd("MEMORY")
                            .arg("USAGE")
                            .arg(key)
                            .arg("SAMPLES")
                            .arg(0)
                            .query::<u64>(&mut redis)
                            .unwrap()
                    })
                    .sum();
                (keys.len(), bytes)
            };
            let (_, user_bytes) = usage(format!("un:v2:{{{tenant}:*"));
            let (_, head_bytes) = usage(format!("un:v2:head:{{{tenant}:*"));
            let entries = PEOPLE * EACH;
            println!(
                "{:<11} preview text {text_bytes:>3} B: users' keys {:>3.0} B per entry, heads {:>3.0} B per conversation, \
                 {:>3.0} B per entry in all",
                if size == 2 { "one-to-one" } else { "groups of 20" },
                user_bytes as f64 / entries as f64,
                head_bytes as f64 / conversations as f64,
                (user_bytes + head_bytes) as f64 / entries as f64,
            );
        }
    }
}

/// What one message costs by the size of its conversation: the touch calls
/// it takes (at most 500 members a call), the Redis commands its scripts run
/// (every `cmdstat_` but the scripts' own), how many of those write data
/// (Redis flags them `write`; events are `PUBLISH`, not counted there), and messages per second at one
/// client (after a first message, so that no first call and no conversion
/// is timed). Written to every member (`large_group_threshold` 0), and with
/// read diffusion (the default), where after the first message the app
/// names only the sender; on one Redis, and on a Redis Cluster (each against
/// the one-to-one message on the same Redis).
async fn message_costs() {
    println!("\n== one message by conversation size (1 client; 500, 100 and 20 messages after a first one)");
    println!("members   how                   touch calls   commands per message   writes   per member   messages/s");
    let every = Arc::new(App::with(Setup { variables: vec![("large_group_threshold", "0".into())], ..quiet() }).await);
    let large = Arc::new(App::with(quiet()).await);
    let cluster = Arc::new(App::with(Setup { cluster: true, ..quiet() }).await);
    let mut one_to_one = 0.0;
    let cases = [
        (&every, 2usize, 500u64, "every member"),
        (&every, 500, 100, "every member"),
        (&every, 10_000, 20, "every member"),
        (&large, 500, 500, "read diffusion"),
        (&large, 10_000, 500, "read diffusion"),
        (&cluster, 2, 500, "cluster"),
        (&cluster, 10_000, 500, "cluster, read diff."),
    ];
    for (app, size, messages, how) in cases {
        let conversation = format!("size{size}");
        let members: Vec<String> = (0..size).map(|k| format!("m{k}")).collect();
        let chunks: Vec<Vec<&str>> =
            members.chunks(500).map(|chunk| chunk.iter().map(String::as_str).collect()).collect();
        let send = async |seq: u64, chunks: &[Vec<&str>]| {
            for chunk in chunks {
                let answer =
                    app.touch(message("bench", &conversation, seq, recent(9_200_000 + seq), "m0", chunk)).await;
                assert_eq!(answer.status, 200, "{:?}", answer.body);
            }
        };
        send(1, &chunks).await;
        let named = if size > 100 && how != "every member" { vec![vec!["m0"]] } else { chunks.clone() };
        let (before, writes_before) = (app.redis.commands_run(), app.redis.writes_run());
        let started = Instant::now();
        for seq in 2..=messages + 1 {
            send(seq, &named).await;
        }
        let rate = messages as f64 / started.elapsed().as_secs_f64();
        let commands = (app.redis.commands_run() - before) as f64 / messages as f64;
        let writes = (app.redis.writes_run() - writes_before) as f64 / messages as f64;
        // Against the one-to-one message on the same Redis (one, or the cluster).
        if size == 2 {
            one_to_one = rate;
        }
        println!(
            "{size:>7}   {how:<19}   {:>11}   {commands:>20.0}   {writes:>6.1}   {:>10.3}   {rate:>10.1} ({:.3}x one-to-one)",
            named.len(),
            commands / size as f64,
            rate / one_to_one
        );
    }
}

/// A user in 200 large groups: list pages and badges at 16 clients (16
/// such users), while one client sends messages to random groups, so that
/// every read has messages to catch up with. Scripts and Redis CPU per
/// read count the writer's scripts too (one per message on one Redis).
/// Then messages to small groups of 20 of those users (every member
/// written, each caught up with its large groups first), at one client.
async fn large_group_reads(cluster: bool) {
    const GROUPS: usize = 200;
    let app = Arc::new(App::with(Setup { cluster, ..quiet() }).await);
    let readers: Vec<String> = (0..16).map(|k| format!("r{k}")).collect();
    let fillers: Vec<String> = (0..100).map(|k| format!("f{k}")).collect();
    let members: Vec<&str> = readers.iter().chain(&fillers).map(String::as_str).collect();
    for g in 0..GROUPS {
        let answer = app
            .touch(message("bench", &large_group_id(g as u64), 1, recent(9_300_000 + g as u64), "f0", &members))
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    println!(
        "\n== a user in {GROUPS} large groups ({} members each), 16 clients, while 1 client writes to them{}",
        members.len(),
        if cluster { ", Redis Cluster" } else { "" }
    );
    if !cluster {
        let mut redis = app.redis.connection().unwrap();
        let bytes: u64 =
            redis::cmd("MEMORY").arg("USAGE").arg("un:v2:{bench:r0}:groups").query(&mut redis).unwrap_or_default();
        println!(
            "a reader's membership records: {bytes} bytes for {GROUPS} large groups, {:.1} per membership",
            bytes as f64 / GROUPS as f64
        );
    }
    println!(
        "call                          calls      rps   p50 ms   p90 ms   p99 ms   max ms | scripts/call  redis us/call | cpu us/call: process redis | messages/s meanwhile"
    );
    let page = call(|app, i| async move { app.list("bench", &format!("r{}", i % 16), "limit=20").await });
    let badge = call(|app, i| async move { app.badge("bench", &format!("r{}", i % 16)).await });
    for (name, request) in [("list (20 per page)", page), ("badge", badge)] {
        let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let writer = {
            let (app, writing) = (app.clone(), writing.clone());
            tokio::spawn(async move {
                let mut sent = 0u64;
                let started = Instant::now();
                while writing.load(std::sync::atomic::Ordering::Relaxed) {
                    let seq = 2 + sent / GROUPS as u64 + u64::from(name == "badge") * 1_000_000;
                    let group = large_group_id(sent % GROUPS as u64);
                    let answer = app.touch(message("bench", &group, seq, recent(9_400_000 + seq), "f1", &["f1"])).await;
                    assert_eq!(answer.status, 200, "{:?}", answer.body);
                    sent += 1;
                }
                sent as f64 / started.elapsed().as_secs_f64()
            })
        };
        let profile = RedisProfile::start(&app);
        let before = CpuUse::read(&app);
        let (run, cost) = phase(&app, 16, 2_000, &request).await;
        let cpu = CpuUse::read(&app).since(&before);
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(profile) = profile {
            profile.print(&app, run.calls);
        }
        let written = writer.await.unwrap();
        large_group_row(name, &run, &cost, &cpu, &format!("{written:>10.0}"));
    }
    // A small group's message writes every member, and each member's state
    // catches up with its large groups first (the event carries the badge):
    // here 20 members who share the same 200 large groups.
    let small: Arc<Vec<String>> = Arc::new(members[..20].iter().map(|m| m.to_string()).collect());
    let touch = call(move |app, i| {
        let small = small.clone();
        async move {
            let members: Vec<&str> = small.iter().map(String::as_str).collect();
            let (group, seq) = (format!("small{}", i % 10), 1 + i as u64 / 10);
            app.touch(message("bench", &group, seq, recent(9_500_000 + i as u64), "r0", &members)).await
        }
    });
    let before = CpuUse::read(&app);
    let (run, cost) = phase(&app, 1, 200, &touch).await;
    let cpu = CpuUse::read(&app).since(&before);
    large_group_row("touch (group of 20 of them)", &run, &cost, &cpu, "");
}

/// The setup every app here starts from: the components' output dropped
/// (`spin up --quiet`), since each call writes an access line, and a run's
/// hundred thousand of them would bury the figures. They still write it.
fn quiet() -> Setup {
    Setup { quiet: true, ..Setup::default() }
}

/// The id of the benchmark's large group `g`, shaped as apps' ids often
/// are (a UUID, 36 bytes): every call of a member walks its groups' ids
/// (which clock holds each), and short ids would hide that cost.
fn large_group_id(g: u64) -> String {
    let mixed = g.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        mixed >> 32,
        (mixed >> 16) & 0xffff,
        g % 0x1000,
        (mixed >> 4) & 0xfff,
        mixed & 0xffff_ffff_ffff
    )
}

/// One line of the large groups' table: `meanwhile`, what the writer sent
/// (its CPU counts in the call's, as its messages are what the calls catch
/// up with).
fn large_group_row(name: &str, run: &Run, cost: &RedisCost, cpu: &CpuUse, meanwhile: &str) {
    let per_call = |usec: f64| usec / run.calls.max(1) as f64;
    println!(
        "{name:<28} {} | {:>12.1}  {:>13.0} | {:>7.0} {:>7.0} | {meanwhile}",
        run.columns(),
        cost.scripts,
        cost.usec,
        per_call(cpu.process),
        per_call(cpu.primaries + cpu.replicas)
    );
}

/// What verifying an identity provider's token costs a call: the badge at
/// one client with tokens of each algorithm (keys given as PEM, so no JWKS
/// fetch is in the loop), against HS256's: a new token on every call (each
/// signature checked), and one token sent again and again (an instance
/// takes a token it verified as verified for a minute).
async fn token_costs() {
    let keys = [SigningKey::rs256("rs"), SigningKey::es256("es"), SigningKey::ed25519("ed")];
    let pem: String = keys.iter().map(|key| key.pem.as_str()).collect();
    let app = Arc::new(App::with(Setup { variables: vec![("jwt_public_keys", pem)], ..quiet() }).await);
    println!("\n== app tokens: GET /v1/badge, 1 client, by the token's algorithm (keys as PEM)");
    println!("alg     tokens           calls   p50 ms   p90 ms   p99 ms | p50 over HS256's (us)");
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600;
    let claims = move |n: usize| json!({"sub": "u1", "tid": "bench", "exp": exp, "jti": n});
    type Mint = Arc<dyn Fn(usize) -> String + Send + Sync>;
    let mut mints: Vec<(&str, Mint)> =
        vec![("HS256", Arc::new(move |n| support::signed_jwt(r#"{"alg":"HS256"}"#, &claims(n), support::JWT_SECRET)))];
    for key in keys {
        let alg = key.alg;
        mints.push((alg, Arc::new(move |n| key.token(&claims(n)))));
    }
    for (kind, fresh) in [("new each call", true), ("one, repeated", false)] {
        let mut hs256_p50 = None;
        for (alg, mint) in &mints {
            let tokens: Arc<Vec<String>> = Arc::new((0..600).map(|n| mint(if fresh { n } else { 0 })).collect());
            let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let badge = call(move |app, _| {
                let token = tokens[next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % tokens.len()].clone();
                async move { app.send("GET", "/v1/badge", Some(token), None).await }
            });
            let _ = phase(&app, 1, 50, &badge).await;
            let (run, _) = phase(&app, 1, 500, &badge).await;
            let base = *hs256_p50.get_or_insert(run.ms(0.5));
            println!(
                "{alg:<7} {kind:<14} {:>7} {:>8.3} {:>8.3} {:>8.3} | {:>+10.0}",
                run.calls,
                run.ms(0.5),
                run.ms(0.9),
                run.ms(0.99),
                (run.ms(0.5) - base) * 1000.0
            );
        }
    }
}

/// The same Redis-backed calls with TCP_NODELAY on the host's accepted
/// sockets (which Spin does not set) and without, 1 and 16 clients.
async fn nodelay_comparison() {
    println!("\n== TCP_NODELAY on the host's sockets (NOT Spin's behaviour; Spin and this host leave Nagle on)");
    println!(
        "call                          clients  nagle on: p50    p90    p99    max | nodelay: p50    p90    p99    max  (ms)"
    );
    let mut apps = Vec::new();
    for tcp_nodelay in [false, true] {
        let app = Arc::new(App::with(Setup { tcp_nodelay, ..quiet() }).await);
        let (_, _) = phase(&app, 16, 400, &calls(0)[0].2).await; // conversations to list
        apps.push(app);
    }
    for (name, counts, request) in calls(1) {
        if !["mark-read", "list (20 per page)", "badge", "404 (no I/O: the platform)"].contains(&name) {
            continue;
        }
        for (level, clients) in LEVELS.iter().copied().enumerate().take(2) {
            let mut cells = Vec::new();
            for app in &apps {
                let (run, _) = phase(app, clients, counts[level], &request).await;
                cells.push(format!(
                    "{:>6.2} {:>6.2} {:>6.2} {:>6.2}",
                    run.ms(0.5),
                    run.ms(0.9),
                    run.ms(0.99),
                    run.ms(1.0)
                ));
            }
            println!("{name:<28} {clients:>8}           {} |          {}", cells[0], cells[1]);
        }
    }
}

/// The same calls against one Redis and against a Redis Cluster of three
/// primaries (each with a replica) on this machine, 16 clients, in turns:
/// rps of each and their ratio. A touch of a group is split by the members'
/// slots (and checked for a category conflict first), so it sends more
/// scripts on a cluster; the reads stay one script per round.
async fn cluster_comparison() {
    println!("\n== Redis Cluster (3 primaries + 3 replicas, same machine) against one Redis, 16 clients");
    println!("call                          one redis rps  p99 ms | cluster rps  p99 ms | cluster/one");
    // Messages of turn `turn` (a later round each), in 1 000 one-to-one
    // conversations.
    let one_to_one = |turn: u64| -> Call {
        let base = turn * 100_000;
        call(move |app, i| async move {
            let (a, b) = (format!("u{}", i % USERS), format!("u{}", (i + 1) % USERS));
            let seq = base + 1 + (i / USERS) as u64;
            app.touch(message("bench", &format!("d{}", i % USERS), seq, recent(seq), &a, &[&a, &b])).await
        })
    };
    let mut apps = Vec::new();
    for cluster in [false, true] {
        let app = Arc::new(App::with(Setup { cluster, ..quiet() }).await);
        let (_, _) = phase(&app, 16, 400, &calls(0)[0].2).await; // conversations to list
        // A live app's messages go to conversations that exist.
        let (_, _) = phase(&app, 16, USERS, &one_to_one(0)).await;
        apps.push(app);
    }
    // Each turn sends new messages (a later round), as a live app does.
    let turn_calls = |turn: u64| -> Vec<(&'static str, Call)> {
        let mut wanted: Vec<(&str, Call)> = vec![("touch (one-to-one)", one_to_one(turn + 1))];
        for (name, _, request) in calls(10 + turn) {
            if ["touch (group of 20)", "mark-read", "list (20 per page)", "badge"].contains(&name) {
                wanted.push((name, request));
            }
        }
        wanted
    };
    let names: Vec<&str> = turn_calls(0).into_iter().map(|(name, _)| name).collect();
    let mut cpu_rows = Vec::new();
    for (index, name) in names.into_iter().enumerate() {
        let mut runs = Vec::new();
        let mut cpu = [CpuUse::default(), CpuUse::default()];
        // Alternate, twice each, so that neither side gets the quieter moment.
        for turn in 0..4 {
            let request = turn_calls(turn as u64).swap_remove(index).1;
            let before = CpuUse::read(&apps[turn % 2]);
            let (run, _) = phase(&apps[turn % 2], 16, 1_000, &request).await;
            cpu[turn % 2].add(&CpuUse::read(&apps[turn % 2]).since(&before));
            runs.push(run);
        }
        let calls = |side: usize| runs[side].calls + runs[side + 2].calls;
        cpu_rows.push((name, cpu, [calls(0), calls(1)]));
        let rps = |side: usize| (runs[side].rps() + runs[side + 2].rps()) / 2.0;
        let p99 = |side: usize| runs[side].ms(0.99).max(runs[side + 2].ms(0.99));
        println!(
            "{name:<28} {:>13.0} {:>7.2} | {:>11.0} {:>7.2} | {:>11.2}",
            rps(0),
            p99(0),
            rps(1),
            p99(1),
            rps(1) / rps(0)
        );
    }
    // Where the machine's CPU went: the cluster's extra cost, by process.
    println!("CPU per call (µs; this process is the host and the clients), one Redis | cluster");
    println!("call                          process   redis |  process primaries replicas |  total ratio");
    for (name, [one, cluster], [one_calls, cluster_calls]) in cpu_rows {
        let per_call = |usec: f64, calls: usize| usec / calls.max(1) as f64;
        println!(
            "{name:<28} {:>8.0} {:>7.0} | {:>8.0} {:>9.0} {:>8.0} | {:>12.2}",
            per_call(one.process, one_calls),
            per_call(one.primaries, one_calls),
            per_call(cluster.process, cluster_calls),
            per_call(cluster.primaries, cluster_calls),
            per_call(cluster.replicas, cluster_calls),
            per_call(cluster.total(), cluster_calls) / per_call(one.total(), one_calls)
        );
    }
}

/// What waiting for a replica costs (`redis_wait_replicas` 1 against 0):
/// one Redis with a replica for both, the same calls in alternating turns
/// at 1 and 16 clients; rps, p50 and p99 of each and their rps ratio.
async fn replica_wait_comparison() {
    println!("\n== waiting for the replica (redis_wait_replicas 1 against 0; one Redis with a replica for both)");
    println!(
        "call                          clients  without: rps  p50 ms  p99 ms |  waiting: rps  p50 ms  p99 ms | ratio"
    );
    let mut apps = Vec::new();
    let mut replicas = Vec::new();
    for wait in ["0", "1"] {
        let app = Arc::new(App::with(Setup { variables: vec![("redis_wait_replicas", wait.into())], ..quiet() }).await);
        let replica = support::RedisServer::start();
        replica.replicate(&app.redis);
        let (_, _) = phase(&app, 16, 400, &calls(0)[0].2).await; // conversations to list
        apps.push(app);
        replicas.push(replica);
    }
    let wanted = ["touch (group of 20)", "mark-read", "mute / unmute", "list (20 per page)", "badge"];
    for (index, name) in wanted.into_iter().enumerate() {
        for (level, clients) in LEVELS.iter().copied().enumerate().take(2) {
            let mut runs = Vec::new();
            // Alternate, twice each, so that neither side gets the quieter moment.
            for turn in 0..4 {
                let (_, counts, request) = calls(1 + (index * 8 + level * 4 + turn) as u64)
                    .into_iter()
                    .find(|(call, _, _)| *call == name)
                    .expect("a measured call");
                let (run, _) = phase(&apps[turn % 2], clients, counts[level] / 2, &request).await;
                runs.push(run);
            }
            let rps = |side: usize| (runs[side].rps() + runs[side + 2].rps()) / 2.0;
            let p50 = |side: usize| (runs[side].ms(0.5) + runs[side + 2].ms(0.5)) / 2.0;
            let p99 = |side: usize| runs[side].ms(0.99).max(runs[side + 2].ms(0.99));
            println!(
                "{name:<28} {clients:>8} {:>13.0} {:>7.2} {:>7.2} | {:>13.0} {:>7.2} {:>7.2} | {:>5.2}",
                rps(0),
                p50(0),
                p99(0),
                rps(1),
                p50(1),
                p99(1),
                rps(1) / rps(0)
            );
        }
    }
}

/// CPU time (µs) used by this process (the host serving the app, and the
/// clients calling it) and by the app's Redis servers, its primaries and
/// its replicas apart.
#[derive(Default, Clone, Copy)]
struct CpuUse {
    process: f64,
    primaries: f64,
    replicas: f64,
}

impl CpuUse {
    fn read(app: &App) -> CpuUse {
        let redis_cpu = |server: &support::RedisServer| -> f64 {
            let info: String = server.command(&["INFO", "cpu"]);
            let field = |name: &str| -> f64 {
                let line = info.lines().find_map(|l| l.strip_prefix(name)).unwrap_or("0");
                line.trim().parse::<f64>().unwrap_or(0.0)
            };
            (field("used_cpu_sys:") + field("used_cpu_user:")) * 1e6
        };
        let (mut primaries, mut replicas) = (0.0, 0.0);
        match &app.cluster {
            Some(cluster) => {
                let serving: Vec<u16> = cluster.primaries().iter().map(|p| p.port).collect();
                for node in &cluster.nodes {
                    match serving.contains(&node.port) {
                        true => primaries += redis_cpu(node),
                        false => replicas += redis_cpu(node),
                    }
                }
            }
            None => primaries = redis_cpu(&app.redis),
        }
        CpuUse { process: process_cpu_usec(), primaries, replicas }
    }

    fn since(&self, before: &CpuUse) -> CpuUse {
        CpuUse {
            process: self.process - before.process,
            primaries: self.primaries - before.primaries,
            replicas: self.replicas - before.replicas,
        }
    }

    fn add(&mut self, other: &CpuUse) {
        self.process += other.process;
        self.primaries += other.primaries;
        self.replicas += other.replicas;
    }

    fn total(&self) -> f64 {
        self.process + self.primaries + self.replicas
    }
}

/// This process's CPU time (user and system, every thread) in µs, from
/// `/proc/self/stat` (clock ticks of 10 ms).
fn process_cpu_usec() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |at: usize| fields.get(at).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime, fields 14 and 15 of the line: 11 and 12 from field 3.
    (ticks(11) + ticks(12)) * 10_000.0
}

/// Redis memory: keys, bytes, and one user's keys with their encodings.
async fn memory(app: &App) {
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
    kept_cursor_bytes(app).await;
    let conversations = app.whole_list("bench", "u7", 100).await.len();
    println!(
        "redis: {keys} keys, {:.1} MiB used, {:.0} bytes per user; user u7: {conversations} conversations in {} keys, {per_user} bytes ({})",
        used as f64 / 1048576.0,
        used as f64 / USERS as f64,
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
    let mut touch = message("bench", "flood", 10_001, recent(199_000), "u0", &names);
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
        app.touch(message("bench", &format!("h{i}"), 1, recent(9_200_000 + i), &peer, &["heavy", &peer])).await;
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

/// With `UNREAD_PROFILE` set, where a phase's Redis time went, per call and
/// summed over every primary: by script (its SHA and the shape of its first
/// key, from `SLOWLOG` logging every command, which slows the phase a
/// little) and by command (`INFO commandstats`: those run inside scripts
/// count too). Redis times them by the clock, so on a loaded machine a
/// script that waited for the CPU counts that wait.
struct RedisProfile {
    commands: BTreeMap<String, (u64, u64)>,
}

impl RedisProfile {
    fn start(app: &App) -> Option<RedisProfile> {
        std::env::var_os("UNREAD_PROFILE")?;
        for mut redis in app.redis.primaries() {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("slowlog-log-slower-than")
                .arg(0)
                .arg("slowlog-max-len")
                .arg(1_000_000)
                .query(&mut redis)
                .unwrap();
            let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut redis).unwrap();
        }
        Some(RedisProfile { commands: app.redis.command_stats() })
    }

    fn print(self, app: &App, calls: usize) {
        let per_call = |n: u64| n as f64 / calls.max(1) as f64;
        let mut scripts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for mut redis in app.redis.primaries() {
            let entries: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(-1).query(&mut redis).unwrap();
            let _: () =
                redis::cmd("CONFIG").arg("SET").arg("slowlog-log-slower-than").arg(10_000).query(&mut redis).unwrap();
            for entry in entries {
                let redis::Value::Array(fields) = entry else { continue };
                let (Some(redis::Value::Int(usec)), Some(redis::Value::Array(words))) = (fields.get(2), fields.get(3))
                else {
                    continue;
                };
                let word = |i: usize| match words.get(i) {
                    Some(redis::Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
                    _ => String::new(),
                };
                if !word(0).eq_ignore_ascii_case("evalsha") {
                    continue;
                }
                // The key's shape: its hash tag's content left out.
                let key = word(3);
                let shape = match (key.find('{'), key.rfind('}')) {
                    (Some(open), Some(close)) if open < close => format!("{}{{}}{}", &key[..open], &key[close + 1..]),
                    _ => key,
                };
                // A catch-up script's first run on a cluster, given no logs
                // yet (`-`), which answers which it needs.
                let first = if (4..words.len()).any(|i| word(i) == "-") { " (no logs yet)" } else { "" };
                let total = scripts.entry(format!("{:.8} {shape}{first}", word(1))).or_default();
                total.0 += 1;
                total.1 += *usec as u64;
            }
        }
        let mut rows: Vec<_> = scripts.into_iter().collect();
        rows.sort_by_key(|(_, (_, usec))| std::cmp::Reverse(*usec));
        println!("   by script (sha, first key)                       runs/call  us/run  us/call");
        for (script, (runs, usec)) in rows {
            println!(
                "   {script:<48} {:>9.2} {:>7.1} {:>8.1}",
                per_call(runs),
                usec as f64 / runs as f64,
                per_call(usec)
            );
        }
        let mut rows: Vec<_> = app
            .redis
            .command_stats()
            .into_iter()
            .map(|(name, (runs, usec))| {
                let (runs_before, usec_before) = self.commands.get(&name).copied().unwrap_or_default();
                (name, runs - runs_before, usec - usec_before)
            })
            .filter(|(name, runs, _)| *runs > 0 && !name.starts_with("slowlog") && !name.starts_with("config"))
            .collect();
        rows.sort_by_key(|(_, _, usec)| std::cmp::Reverse(*usec));
        println!("   by command                                       runs/call          us/call");
        for (name, runs, usec) in rows {
            println!("   {name:<48} {:>9.2}         {:>8.1}", per_call(runs), per_call(usec));
        }
    }
}
