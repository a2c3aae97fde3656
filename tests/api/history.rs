//! The product's most important test: seeded, reproducible random histories
//! played against the API, every answer and every published event checked
//! against a model at every step — never only after a repair.
//!
//! Each client plays a tenant of its own (so that its answers are exactly
//! determined by its own steps) while the others play theirs at the same
//! time. A tenant has 8 users and 30 conversations, and each user lists at
//! most 5, so trims happen all the time. The steps: messages (with
//! mentions, @all floods, duplicate, replayed and held-back touches), reads
//! from 2-3 devices with stale and fresh acks (some before the touch they
//! cover), lists, badges, mutes, pins, marks, recalls (some before their
//! touch, some replayed), joins, leaves and rejoins, and deletes.
//!
//! The model (below) is the product's semantics written again, plainly:
//! per user and conversation the last message, read cursor, settings,
//! mentions and recalls; the list is the pinned conversations and then the
//! newest, at most `max_conversations`; the badge sums what is listed.
//!
//! Cache-only: held-back touches arrive out of order, and nothing is ever
//! reconciled. With SQL (MariaDB, PostgreSQL) the app stores every message
//! before it touches, and Redis is killed mid-run: answers while it is down
//! come from SQL, and after it comes back empty every answer must again be
//! exactly the model — repaired on read, before any reconcile. A reconcile
//! at the end must find nothing to fix; so must the operator's reconciles
//! in the middle of the history (one step in a hundred) while Redis has
//! lost nothing, and whatever any of them rewrites must leave every answer
//! and event the model's.
//!
//! On Redis Cluster (three primaries with a replica each) the same
//! histories run while slots move between primaries (cache-only) and while
//! a primary fails over to its replica (PostgreSQL, every write waiting for
//! its node's replica: `redis_wait_replicas` 1): every answer in the middle
//! of the move must be exactly the model or a clean 503.
//!
//! In every variant, conversations that one touch names more than
//! `LARGE_GROUP_THRESHOLD` members of become large (read diffusion): their
//! members catch up on use, and the app's touches then often name only the
//! sender and the mentioned. The model keeps who the service reaches with
//! such a message (the members it named since, or that joined), and what a
//! push gateway is told: one event for the conversation instead of one per
//! member. With SQL, a Redis that comes back empty makes them large again
//! from the truth, and users rebuilt from it catch up with them.
//!
//! `UNREAD_HISTORY_OPS` sets the size (CI: 10 000 per variant);
//! `UNREAD_HISTORY_SEED` the seed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::store::{Kind, MessageStore, P, s};
use crate::support::{Answer, App, Events, Setup, message};

const CLIENTS: usize = 8;
const USERS: usize = 8;
const CONVERSATIONS: usize = 30;
const MAX_CONVERSATIONS: usize = 5;
const MAX_PINS: usize = 3;
const DEVICES: usize = 3;
const READ_AHEAD: u64 = 10_000;
/// The messages a head keeps before its last one (for seconds).
const RECENT_PREVIEWS: usize = 8;
/// A conversation whose touch names more members than this becomes large:
/// most groups of the history do, at once or as members join.
const LARGE_GROUP_THRESHOLD: usize = 3;

fn ops() -> usize {
    std::env::var("UNREAD_HISTORY_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

fn seed() -> u64 {
    std::env::var("UNREAD_HISTORY_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(2026)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_without_sql() {
    run(None, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_mariadb_with_redis_killed() {
    run(Some(Kind::MariaDb), Some(Disruption::Kill)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_postgres_with_redis_killed() {
    run(Some(Kind::Postgres), Some(Disruption::Kill)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_a_cluster_while_slots_move() {
    run(None, Some(Disruption::Reshard)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_on_postgres_and_a_cluster_through_a_failover() {
    run(Some(Kind::Postgres), Some(Disruption::Failover)).await;
}

/// What happens to Redis halfway through a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disruption {
    /// `kill -9`, then a restart, empty (one Redis, with a SQL store).
    Kill,
    /// A third of the slots move from one primary to another (cluster).
    Reshard,
    /// A primary fails over to its replica (cluster).
    Failover,
}

/// What the run shares across clients.
struct Shared {
    /// Which variant: "cache", "MariaDb", "Postgres".
    label: String,
    app: App,
    store: Option<MessageStore>,
    ops: AtomicUsize,
    /// When and what happens to Redis.
    disruption: Option<(usize, Disruption)>,
    /// Redis is down (between the kill and the restart).
    down: AtomicBool,
    /// The disruption happened (the reshard or failover has begun).
    disrupted: AtomicBool,
    /// A reshard or failover under way, waited for at the end.
    moving: Mutex<Option<tokio::task::JoinHandle<()>>>,
    counts: Mutex<HashMap<&'static str, usize>>,
}

type Mutex<T> = std::sync::Mutex<T>;

impl Shared {
    fn count(&self, what: &'static str) {
        *self.counts.lock().unwrap().entry(what).or_default() += 1;
    }
}

async fn run(kind: Option<Kind>, disruption: Option<Disruption>) {
    let total = ops();
    let store = match kind {
        Some(kind) => Some(MessageStore::create(kind).await),
        None => None,
    };
    // Through a failover, every write waits for its node's replica.
    let wait_replicas = if disruption == Some(Disruption::Failover) { 1 } else { 0 };
    let app = App::with(Setup {
        max_conversations: MAX_CONVERSATIONS as u32,
        sql_url: store.as_ref().map(|s| s.url.clone()),
        variables: vec![
            ("max_pins", MAX_PINS.to_string()),
            ("large_group_threshold", LARGE_GROUP_THRESHOLD.to_string()),
            ("redis_wait_replicas", wait_replicas.to_string()),
        ],
        cluster: matches!(disruption, Some(Disruption::Reshard | Disruption::Failover)),
        ..Setup::default()
    })
    .await;
    let shared = Arc::new(Shared {
        label: format!(
            "{}{}",
            kind.map_or("cache".to_string(), |k| format!("{k:?}")),
            match disruption {
                Some(Disruption::Reshard | Disruption::Failover) => "-cluster",
                _ => "",
            }
        ),
        app,
        store,
        ops: AtomicUsize::new(0),
        disruption: disruption.map(|d| (total / 2, d)),
        down: AtomicBool::new(false),
        disrupted: AtomicBool::new(false),
        moving: Mutex::new(None),
        counts: Mutex::new(HashMap::new()),
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut world = World::new(&shared, client).await;
                for _ in 0..total / CLIENTS {
                    world.step().await;
                }
                world.finish().await;
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let moving = shared.moving.lock().unwrap().take();
    if let Some(moving) = moving {
        moving.await.unwrap();
    }
    let counts = shared.counts.lock().unwrap().clone();
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort();
    println!("history {kind:?} {disruption:?}: {} ops: {counts:?}", shared.ops.load(SeqCst));
    if disruption.is_some() {
        assert!(shared.disrupted.load(SeqCst), "the disruption happened");
    }
    if let Some(cluster) = &shared.app.cluster {
        let count = |code: &str| -> u64 { cluster.nodes.iter().map(|node| node.errors(code)).sum() };
        let (moved, ask, again) = (count("MOVED"), count("ASK"), count("TRYAGAIN"));
        println!("history on a cluster: MOVED {moved}, ASK {ask}, TRYAGAIN {again}");
        assert!(moved > 0, "the app was never redirected: nothing moved under it");
    }
    if kind.is_some() {
        for client in 0..CLIENTS {
            let report = shared.app.reconcile_all(&tenant(client)).await;
            assert_eq!((report["drifted"].as_u64(), report["max_drift"].as_u64()), (Some(0), Some(0)), "{report}");
        }
    }
    let Shared { app, store, .. } = Arc::into_inner(shared).unwrap();
    drop(app);
    if let Some(store) = store {
        store.drop_database().await;
    }
}

fn tenant(client: usize) -> String {
    format!("h{client}")
}

// The model -----------------------------------------------------------------

/// One conversation as one user sees it.
#[derive(Clone, Debug, Default)]
struct Entry {
    category: String,
    last: u64,
    read: u64,
    score: u64,
    muted: bool,
    pinned: bool,
    marked: bool,
    mentions: BTreeSet<u64>,
    recalled: BTreeSet<u64>,
    /// Left, or deleted: late touches change nothing.
    gone: bool,
}

/// What a listed conversation counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Counted {
    unread: u64,
    badge: u64,
    muted: u64,
    mentions: u64,
}

impl Entry {
    fn counted(&self) -> Counted {
        let between = |s: &&u64| **s > self.read && **s <= self.last;
        let recalled = self.recalled.iter().filter(between).count() as u64;
        let unread = self.last.saturating_sub(self.read).saturating_sub(recalled);
        let mentions = self.mentions.iter().filter(between).filter(|s| !self.recalled.contains(s)).count() as u64;
        let badge = if self.muted {
            0
        } else if self.marked && unread == 0 {
            1
        } else {
            unread
        };
        Counted { unread, badge, muted: if self.muted { unread } else { 0 }, mentions }
    }

    /// The row the list shows, with the preview of the conversation's `head`
    /// if the user's last message is the head's (else none: the user was not
    /// told of the newer message).
    fn row(&self, id: &str, head: Option<&Head>) -> Value {
        let counted = self.counted();
        let preview = match head {
            Some(head) if head.seq == self.last => head.preview.clone(),
            _ => json!({}),
        };
        json!({
            "id": id, "category": self.category, "unread": counted.unread, "mentions": counted.mentions,
            "muted": self.muted, "pinned": self.pinned, "marked_unread": self.marked,
            "last_seq": self.last, "read_seq": self.read, "ts": self.score / 1000, "preview": preview,
        })
    }

    fn shows(&self) -> bool {
        !self.gone && self.last > 0
    }
}

/// A conversation's head as the service holds it: its newest touched
/// message and that message's preview, stored once for every member.
#[derive(Clone, Debug, Default)]
struct Head {
    seq: u64,
    score: u64,
    category: String,
    preview: Value,
    /// Previews recalls left for messages not touched yet.
    replacements: HashMap<u64, Value>,
    /// The messages it held before, newest first: a row whose last message
    /// is among them may show its preview for the seconds they are kept.
    recent: Vec<(u64, Value)>,
}

impl Head {
    /// A touch of `seq` landed.
    fn touched(&mut self, seq: u64, score: u64, category: &str, preview: &Value) {
        if seq > self.seq {
            if self.seq > 0 {
                self.recent.insert(0, (self.seq, self.preview.clone()));
                self.recent.truncate(RECENT_PREVIEWS);
            }
            (self.seq, self.score, self.category) = (seq, score, category.to_string());
            self.preview = self.replacements.remove(&seq).unwrap_or_else(|| preview.clone());
            self.replacements.retain(|s, _| *s > seq);
        }
    }

    /// A recall of `seq` with a replacement preview landed.
    fn recalled(&mut self, seq: u64, preview: &Value) {
        if seq == self.seq {
            self.preview = preview.clone();
        } else if seq > self.seq {
            self.replacements.insert(seq, preview.clone());
        } else if let Some(held) = self.recent.iter_mut().find(|(s, _)| *s == seq) {
            held.1 = preview.clone();
        }
    }

    /// A row the service gave, read as the model gives it: a preview of
    /// the row's last message that the head's recent messages hold is what
    /// the model's empty preview stands for while they are kept.
    fn as_modelled(&self, mut row: Value) -> Value {
        let last = row["last_seq"].as_u64();
        if last != Some(self.seq) && self.recent.iter().any(|(s, p)| Some(*s) == last && *p == row["preview"]) {
            row["preview"] = json!({});
        }
        row
    }
}

/// Every user's view of a tenant, and the conversations' heads.
#[derive(Default)]
struct Model {
    views: HashMap<String, HashMap<String, Entry>>,
    heads: HashMap<String, Head>,
}

impl Model {
    /// A row the service gave, as the model gives it (see [`Head::as_modelled`]).
    fn as_modelled(&self, row: &Value) -> Value {
        match row["id"].as_str().and_then(|id| self.heads.get(id)) {
            Some(head) => head.as_modelled(row.clone()),
            None => row.clone(),
        }
    }

    fn entry(&mut self, user: &str, conversation: &str) -> &mut Entry {
        self.views.entry(user.to_string()).or_default().entry(conversation.to_string()).or_default()
    }

    fn get(&self, user: &str, conversation: &str) -> Option<&Entry> {
        self.views.get(user)?.get(conversation)
    }

    /// The user's list in order: pinned ones, then the newest, at most
    /// MAX_CONVERSATIONS in all (pinned ones always).
    fn list(&self, user: &str) -> Vec<(String, Entry)> {
        let Some(view) = self.views.get(user) else { return Vec::new() };
        let mut shown: Vec<(&String, &Entry)> = view.iter().filter(|(_, e)| e.shows()).collect();
        shown.sort_by(|a, b| (b.1.pinned, b.1.score, b.0).cmp(&(a.1.pinned, a.1.score, a.0)));
        let pins = shown.iter().filter(|(_, e)| e.pinned).count();
        let room = MAX_CONVERSATIONS.saturating_sub(pins);
        let mut listed = Vec::new();
        let mut unpinned = 0;
        for (id, entry) in shown {
            if entry.pinned || unpinned < room {
                unpinned += usize::from(!entry.pinned);
                listed.push((id.clone(), entry.clone()));
            }
        }
        listed
    }

    fn is_listed(&self, user: &str, conversation: &str) -> bool {
        self.list(user).iter().any(|(id, _)| id == conversation)
    }

    fn rows(&self, user: &str) -> Vec<Value> {
        self.list(user).iter().map(|(id, e)| e.row(id, self.heads.get(id))).collect()
    }

    fn badge(&self, user: &str) -> Value {
        let mut categories: HashMap<String, u64> = HashMap::new();
        let (mut total, mut muted, mut mentions) = (0, 0, 0);
        for (_, entry) in self.list(user) {
            let counted = entry.counted();
            if counted.badge > 0 {
                *categories.entry(entry.category.clone()).or_default() += counted.badge;
            }
            total += counted.badge;
            muted += counted.muted;
            mentions += counted.mentions;
        }
        json!({"total": total, "muted": muted, "mentions": mentions, "categories": categories})
    }

    fn totals(&self, user: &str) -> Value {
        let badge = self.badge(user);
        json!({"total": badge["total"], "muted": badge["muted"], "mentions": badge["mentions"]})
    }
}

// The world of one client: a tenant, its app data and its model -------------

struct Conversation {
    id: String,
    category: &'static str,
    members: Vec<String>,
    last: u64,
    /// The last message's list score and preview (the app's head).
    score: u64,
    preview: Value,
    deleted: bool,
    /// The service made it large (read diffusion): a touch that named more
    /// than the threshold landed.
    large: bool,
    /// Who a message of the large conversation reaches without being
    /// named: the members the service's touches named since it became
    /// large, and those that joined it (minus those that left).
    reach: BTreeSet<String>,
    /// Messages recalled while it was large: the conversation's log, which
    /// members who join later catch up with too.
    logged_recalls: BTreeSet<u64>,
    /// Who joined while it was small (minus those that left): the touch
    /// that makes it large reaches them too, named or not (a touch the app
    /// built before they joined, delivered late), as the service hands its
    /// recent joiners over to the log.
    joined: BTreeSet<String>,
}

struct World {
    shared: Arc<Shared>,
    tenant: String,
    rng: StdRng,
    users: Vec<String>,
    conversations: Vec<Conversation>,
    model: Model,
    /// Touches held back (cache-only) or to be sent again, delivered later.
    held: Vec<Value>,
    /// Recalls to be sent again later: conversation index and body.
    recalls_again: Vec<(usize, Value)>,
    /// Service calls refused while Redis was down, sent again later (SQL).
    retry: Vec<(String, Value)>,
    /// (user, device) -> conversation -> newest seq that device has seen.
    seen: HashMap<(String, usize), HashMap<String, u64>>,
    clock: u64,
    events: Option<Events>,
    /// Every user's badge totals in the model when events were last checked.
    told: HashMap<String, Value>,
    /// A call timed out (the machine is loaded): what it published is not
    /// known until it has been sent again.
    unsure: bool,
    /// With UNREAD_HISTORY_TRACE=<dir>, every call and answer is written to
    /// <dir>/<variant>-<tenant>.log, to read what led to a failure.
    trace: Option<std::fs::File>,
}

/// When a client's messages begin. Half the clients write messages of a day
/// ago, half of a year ago: on a cluster a list page reads the heads of
/// recent rows with plain reads, and takes the script (which renews a
/// head's time to live) for rows older than half a head's life.
fn start_of_time(client: usize) -> u64 {
    if client.is_multiple_of(2) {
        return 1_764_460_800_000;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    now.as_millis() as u64 - 24 * 3600 * 1000
}

impl World {
    async fn new(shared: &Arc<Shared>, client: usize) -> World {
        let tenant = tenant(client);
        let mut rng = StdRng::seed_from_u64(seed() * 100 + client as u64);
        let users: Vec<String> = (0..USERS).map(|i| format!("u{i}")).collect();
        let mut conversations = Vec::new();
        for i in 0..CONVERSATIONS {
            let size = if i % 3 == 0 { 2 } else { rng.random_range(3..=5) };
            let members: Vec<String> = users.choose_multiple(&mut rng, size).cloned().collect();
            let category = ["chat", "chat", "system"][i % 3];
            let id = format!("c{i:02}");
            if let Some(store) = &shared.store {
                store.create_conversation(&tenant, &id, category, &members).await;
            }
            conversations.push(Conversation {
                id,
                category,
                members,
                last: 0,
                score: 0,
                preview: json!({}),
                deleted: false,
                large: false,
                reach: BTreeSet::new(),
                logged_recalls: BTreeSet::new(),
                joined: BTreeSet::new(),
            });
        }
        let events = Events::try_subscribe(&shared.app, &tenant);
        let trace = std::env::var("UNREAD_HISTORY_TRACE")
            .ok()
            .map(|dir| std::fs::File::create(format!("{dir}/{}-{tenant}.log", shared.label)).unwrap());
        World {
            shared: shared.clone(),
            tenant,
            rng,
            users,
            conversations,
            model: Model::default(),
            held: Vec::new(),
            recalls_again: Vec::new(),
            retry: Vec::new(),
            seen: HashMap::new(),
            clock: start_of_time(client),
            events,
            told: HashMap::new(),
            unsure: false,
            trace,
        }
    }

    fn trace(&mut self, line: impl FnOnce() -> String) {
        if let Some(file) = &mut self.trace {
            use std::io::Write;
            writeln!(file, "{}", line()).unwrap();
        }
    }

    fn sql(&self) -> bool {
        self.shared.store.is_some()
    }

    async fn step(&mut self) {
        let n = self.shared.ops.fetch_add(1, SeqCst);
        match self.shared.disruption {
            Some((at, Disruption::Kill)) if at == n => {
                self.trace(|| "kill".to_string());
                self.shared.down.store(true, SeqCst);
                self.shared.app.redis.kill();
                self.shared.disrupted.store(true, SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                self.shared.app.redis.restart();
                self.shared.down.store(false, SeqCst);
            }
            // The cluster stays up: this client and the others go on while
            // the slots move or the primary fails over.
            Some((at, disruption)) if at == n => {
                self.trace(|| format!("{disruption:?}"));
                self.shared.disrupted.store(true, SeqCst);
                let shared = self.shared.clone();
                *self.shared.moving.lock().unwrap() = Some(tokio::task::spawn_blocking(move || {
                    let cluster = shared.app.cluster.as_ref().unwrap();
                    let primaries = cluster.primaries();
                    match disruption {
                        Disruption::Reshard => cluster.reshard(primaries[0], primaries[1], 5461),
                        _ => cluster.fail_over(primaries[2]),
                    }
                }));
            }
            _ => {}
        }
        if !self.retry.is_empty() && !self.shared.down.load(SeqCst) {
            self.send_again().await;
        }
        if self.sql() && self.rng.random_bool(0.01) {
            return self.reconcile().await;
        }
        match self.rng.random_range(0..100) {
            0..30 => self.send().await,
            30..33 => self.flood().await,
            33..37 => self.deliver_held().await,
            37..38 => self.send_recall_again().await,
            38..56 => self.mark_read().await,
            56..68 => self.list().await,
            68..76 => self.badge().await,
            76..80 => self.recall().await,
            80..88 => self.flag().await,
            88..93 => self.join().await,
            93..98 => self.leave().await,
            _ => self.delete().await,
        }
    }

    /// The end: everything held back, sent again or refused arrives, and
    /// every user's list and badge equal the model.
    async fn finish(&mut self) {
        while !self.held.is_empty() {
            let touch = self.held.remove(0);
            self.deliver(touch).await;
        }
        while !self.recalls_again.is_empty() {
            self.send_recall_again().await;
        }
        self.send_again().await;
        for user in self.users.clone() {
            self.check_list(&user).await;
        }
    }

    fn live(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.conversations.len()).filter(|i| !self.conversations[*i].deleted).collect();
        live.choose(&mut self.rng).copied()
    }

    fn next_ts(&mut self) -> u64 {
        // Roughly increasing time, with same-millisecond messages.
        self.clock += self.rng.random_range(0..2);
        self.clock
    }

    /// The app stores a message and touches it: duplicated now and then,
    /// sent again later now and then, held back now and then (cache-only).
    async fn send(&mut self) {
        let Some(i) = self.live() else { return };
        let mentions = if self.rng.random_bool(0.2) {
            self.conversations[i].members.choose_multiple(&mut self.rng, 2).cloned().collect()
        } else {
            Vec::new()
        };
        let all = self.rng.random_bool(0.05);
        self.message(i, mentions, all).await;
    }

    /// A burst of @all messages.
    async fn flood(&mut self) {
        let Some(i) = self.live() else { return };
        for _ in 0..self.rng.random_range(5..20) {
            self.message(i, Vec::new(), true).await;
        }
    }

    async fn message(&mut self, i: usize, mentions: Vec<String>, all: bool) {
        let ts = self.next_ts();
        let c = &mut self.conversations[i];
        if c.members.is_empty() {
            return;
        }
        c.last += 1;
        let seq = c.last;
        let sender = c.members.choose(&mut self.rng).unwrap().clone();
        let preview = json!({"text": format!("{} #{seq}", c.id), "type": "text", "sender_name": sender});
        (c.score, c.preview) = (ts * 1000 + seq % 1000, preview.clone());
        let mut touch = message(&self.tenant, &c.id, seq, ts, &sender, &[]);
        touch["members"] = json!(c.members);
        if c.large && self.rng.random_bool(0.5) {
            // A large conversation's touch need name only these.
            let mut named = vec![sender.clone()];
            named.extend(mentions.iter().filter(|m| **m != sender).cloned());
            touch["members"] = json!(named);
            self.shared.count("touches naming the sender and the mentioned only");
        }
        touch["preview"] = preview.clone();
        touch["category"] = json!(c.category);
        touch["mentions"] = json!(mentions);
        touch["mention_all"] = json!(all);
        if let Some(store) = &self.shared.store {
            store.store_message(&self.tenant, &c.id.clone(), seq, ts, &sender, &preview.to_string()).await;
        }
        self.shared.count("messages");
        if !self.sql() && self.rng.random_bool(0.1) {
            self.shared.count("held back");
            self.held.push(touch);
            return;
        }
        if self.sql() {
            // The truth holds the message from now on, whenever its touch lands.
            self.apply_touch(&touch);
        }
        self.deliver(touch.clone()).await;
        if self.rng.random_bool(0.05) {
            self.shared.count("duplicate touches");
            self.deliver(touch.clone()).await;
        }
        if self.rng.random_bool(0.05) {
            // A queue that delivers at least once sends it again, later.
            self.shared.count("touches sent again later");
            self.held.push(touch);
        }
    }

    async fn deliver_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let i = self.rng.random_range(0..self.held.len());
        let touch = self.held.swap_remove(i);
        self.deliver(touch).await;
    }

    /// Sends a touch; cache-only, the model takes it when it lands.
    async fn deliver(&mut self, touch: Value) {
        if !self.sql() {
            self.apply_touch(&touch);
        }
        self.service("/v1/touch", touch).await;
    }

    /// A service call; while Redis is down (SQL) it is refused and sent
    /// again later, as the app would.
    async fn service(&mut self, path: &str, body: Value) -> Option<Answer> {
        loop {
            let answer = self.shared.app.service(path, body.clone()).await;
            self.trace(|| format!("{path} {body} -> {} {}", answer.status, answer.body));
            match answer.status {
                200 => {
                    self.check_events().await;
                    return Some(answer);
                }
                503 if self.sql() && self.shared.down.load(SeqCst) => {
                    self.shared.count("refused while Redis was down");
                    self.retry.push((path.to_string(), body));
                    self.unsure = true;
                    return None;
                }
                503 => self.timed_out().await,
                status => panic!("{path} answered {status}: {:?} for {body}", answer.body),
            }
        }
    }

    /// The operator reconciles this tenant in the middle of the history
    /// (SQL): whatever it rewrites leaves every answer and event the
    /// model's, and while Redis has lost nothing and no refused call waits
    /// to be sent again, it finds nothing to fix.
    async fn reconcile(&mut self) {
        let (mut drifted, mut cursor) = (0, Value::Null);
        loop {
            let body = json!({"tenant": self.tenant, "cursor": cursor});
            let answer = self.shared.app.reconcile(body.clone()).await;
            self.trace(|| format!("/v1/admin/reconcile {body} -> {} {}", answer.status, answer.body));
            match answer.status {
                200 => self.check_events().await,
                503 => {
                    // Redis is down, or a deadline passed: the next one will do.
                    self.shared.count("reconciles refused");
                    self.unsure = true;
                    return;
                }
                status => panic!("reconcile answered {status}: {:?}", answer.body),
            }
            drifted += answer.body["drifted"].as_u64().unwrap();
            cursor = answer.body["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        if !self.shared.disrupted.load(SeqCst) && self.retry.is_empty() {
            assert_eq!(drifted, 0, "{}: a reconcile in the middle of the history found drift", self.tenant);
            self.shared.count("reconciles with nothing to fix");
        }
        self.shared.count("reconciles");
    }

    /// A call answered 503 while Redis was up: a deadline passed on a loaded
    /// machine. Every call is idempotent; it is sent again, as an app would.
    async fn timed_out(&mut self) {
        self.shared.count("sent again after a 503");
        self.unsure = true;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    async fn send_again(&mut self) {
        for (path, body) in std::mem::take(&mut self.retry) {
            self.service(&path, body).await;
        }
    }

    /// The model of a touch landing.
    fn apply_touch(&mut self, touch: &Value) {
        let (conversation, seq) = (touch["conversation"].as_str().unwrap(), touch["seq"].as_u64().unwrap());
        let score = touch["ts"].as_u64().unwrap() * 1000 + seq % 1000;
        let sender = touch["sender"].as_str().unwrap();
        let mentioned: Vec<&str> = touch["mentions"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        let all = touch["mention_all"] == true;
        let category = touch["category"].as_str().unwrap();
        self.model.heads.entry(conversation.to_string()).or_default().touched(seq, score, category, &touch["preview"]);
        let named: Vec<String> =
            touch["members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect();
        let c = self.conversations.iter_mut().find(|c| c.id == conversation).unwrap();
        if !c.large && named.len() > LARGE_GROUP_THRESHOLD {
            c.large = true;
            self.shared.count("conversations made large");
            let joiners = std::mem::take(&mut c.joined);
            if joiners.iter().any(|m| !named.contains(m)) {
                self.shared.count("joiners the message making a group large did not name");
            }
            c.reach.extend(joiners);
        }
        let mut reached = named.clone();
        if c.large {
            reached.extend(c.reach.iter().filter(|m| !named.contains(m)).cloned());
        }
        for member in &reached {
            let entry = self.model.entry(member, conversation);
            if entry.gone {
                continue;
            }
            if c.large {
                c.reach.insert(member.clone());
            }
            entry.category = category.to_string();
            if seq > entry.last {
                entry.last = seq;
                entry.score = score;
            }
            if member == sender {
                // The message takes the sender's mark-unread only if it moves
                // their cursor: sent again, it leaves a mark set after it.
                if seq > entry.read {
                    entry.read = seq;
                    entry.marked = false;
                }
            } else if (all || mentioned.contains(&member.as_str()))
                && seq > entry.read
                && !entry.recalled.contains(&seq)
            {
                entry.mentions.insert(seq);
            }
        }
    }

    async fn mark_read(&mut self) {
        let Some(i) = self.live() else { return };
        let c = &self.conversations[i];
        let user = if c.members.is_empty() || self.rng.random_bool(0.05) {
            self.users.choose(&mut self.rng).unwrap().clone()
        } else {
            c.members.choose(&mut self.rng).unwrap().clone()
        };
        let (id, last) = (c.id.clone(), c.last);
        let member = c.members.contains(&user);
        let device = self.rng.random_range(0..DEVICES);
        let seen = self.seen.get(&(user.clone(), device)).and_then(|s| s.get(&id).copied()).unwrap_or(0);
        // A stale ack (what this device last saw) or a fresh one (pushed the newest).
        let ack = if self.rng.random_bool(0.3) { last } else { seen };
        if ack == 0 {
            return;
        }
        let answer = loop {
            let answer = self.shared.app.mark_read(&self.tenant, &user, &id, ack).await;
            self.trace(|| format!("mark-read {user} {id} {ack} -> {} {}", answer.status, answer.body));
            if answer.status != 503 {
                break answer;
            }
            self.timed_out().await;
        };
        self.shared.count("mark-reads");
        let gone = self.model.get(&user, &id).is_some_and(|e| e.gone);
        if (self.sql() && !member) || (!self.sql() && gone) {
            assert_eq!(answer.status, 404, "{user} {id}: {:?}", answer.body);
            return;
        }
        assert_eq!(answer.status, 200, "{user} {id} {ack}: {:?}", answer.body);
        let entry = self.model.entry(&user, &id);
        let ack = ack.min(entry.last + READ_AHEAD);
        if ack > entry.read || entry.marked {
            entry.read = entry.read.max(ack);
            entry.marked = false;
        }
        let (read, counted) = (entry.read, entry.counted());
        let expected = json!({"read_seq": read, "unread": counted.unread, "mentions": counted.mentions});
        let got = json!({"read_seq": answer.body["read_seq"], "unread": answer.body["unread"], "mentions": answer.body["mentions"]});
        assert_eq!(got, expected, "{} mark-read {user} {id} {ack}", self.tenant);
        self.check_badge(&user, &answer.body["badge"], "mark-read");
        self.check_events().await;
    }

    async fn list(&mut self) {
        let user = self.users.choose(&mut self.rng).unwrap().clone();
        let device = self.rng.random_range(0..DEVICES);
        let rows = self.check_list(&user).await;
        let seen = self.seen.entry((user, device)).or_default();
        for row in rows {
            seen.insert(row["id"].as_str().unwrap().to_string(), row["last_seq"].as_u64().unwrap());
        }
        self.shared.count("lists");
    }

    /// The user's whole list (pages of 2) and its badge against the model.
    async fn check_list(&mut self, user: &str) -> Vec<Value> {
        let mut rows = Vec::new();
        let mut query = "limit=2".to_string();
        loop {
            let page = self.shared.app.list(&self.tenant, user, &query).await;
            self.trace(|| format!("list {user} {query} -> {} {}", page.status, page.body));
            if page.status == 503 {
                self.timed_out().await;
                continue;
            }
            assert_eq!(page.status, 200, "{:?}", page.body);
            self.check_badge(user, &page.body["badge"], "list");
            rows.extend(page.body["conversations"].as_array().unwrap().iter().map(|row| self.model.as_modelled(row)));
            match page.body["next_cursor"].as_str() {
                Some(cursor) => query = format!("limit=2&cursor={cursor}"),
                None => break,
            }
        }
        assert_eq!(rows, self.model.rows(user), "{} list of {user}", self.tenant);
        self.check_events().await;
        rows
    }

    fn check_badge(&self, user: &str, badge: &Value, what: &str) {
        let mut badge = badge.clone();
        badge.as_object_mut().unwrap().remove("degraded");
        badge.as_object_mut().unwrap().remove("source");
        assert_eq!(badge, self.model.badge(user), "{} badge of {user} in {what}", self.tenant);
    }

    async fn badge(&mut self) {
        let user = self.users.choose(&mut self.rng).unwrap().clone();
        let answer = loop {
            let answer = self.shared.app.badge(&self.tenant, &user).await;
            if answer.status != 503 {
                break answer;
            }
            self.timed_out().await;
        };
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        self.check_badge(&user, &answer.body, "badge");
        self.check_events().await;
        self.shared.count("badges");
    }

    /// A message recalled: mostly one that exists, now and then the next one
    /// before its touch (cache-only).
    async fn recall(&mut self) {
        let Some(i) = self.live() else { return };
        let c = &self.conversations[i];
        let early = !self.sql() && self.rng.random_bool(0.3);
        let seq = if early {
            c.last + 1
        } else if c.last == 0 {
            return;
        } else {
            self.rng.random_range(1..=c.last)
        };
        let (id, members) = (c.id.clone(), c.members.clone());
        if members.is_empty() {
            return;
        }
        let preview = self.rng.random_bool(0.5).then(|| json!({"type": "recalled", "seq": seq}));
        if let (Some(store), Some(preview)) = (&self.shared.store, &preview) {
            // The app applies a recall of its last message to its heads.
            if seq == self.conversations[i].last {
                self.conversations[i].preview = preview.clone();
            }
            store
                .exec(
                    "UPDATE app_conversations SET preview = ? WHERE tenant = ? AND conversation = ? AND last_seq = ?",
                    &[s(&preview.to_string()), s(&self.tenant), s(&id), P::I(seq as i64)],
                )
                .await;
        }
        let mut body = json!({"tenant": self.tenant, "conversation": id, "seq": seq, "members": members});
        if let Some(preview) = preview {
            body["preview"] = preview;
        }
        self.send_recall(i, &body).await;
        if self.rng.random_bool(0.15) {
            // A queue that delivers at least once sends it again, later.
            self.shared.count("recalls sent again later");
            self.recalls_again.push((i, body));
        }
        self.shared.count("recalls");
    }

    /// A recall (`body`) of conversation `i` reaches the service, and the
    /// model takes it: once, or again later, when it changes nothing more.
    async fn send_recall(&mut self, i: usize, body: &Value) {
        let (id, seq) = (body["conversation"].as_str().unwrap().to_string(), body["seq"].as_u64().unwrap());
        let members: Vec<String> =
            body["members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect();
        let preview = body.get("preview").cloned();
        if let Some(preview) = &preview {
            self.model.heads.entry(id.clone()).or_default().recalled(seq, preview);
        }
        // A large conversation's recall is the conversation's: its log tells
        // every member it reaches, and those that join later; the service
        // writes (and counts) only the members named that it does not reach.
        let c = &mut self.conversations[i];
        let (large, reach) = (c.large, c.reach.clone());
        let mut recalled_for = members.clone();
        if large {
            c.logged_recalls.insert(seq);
            recalled_for.extend(reach.iter().filter(|m| !members.contains(m)).cloned());
        }
        let mut dropped = 0;
        for member in &recalled_for {
            let counts = !reach.contains(member) && members.contains(member);
            let listed = self.model.is_listed(member, &id);
            let entry = self.model.entry(member, &id);
            if entry.gone {
                continue;
            }
            let before = entry.counted();
            if seq > entry.read && !entry.recalled.contains(&seq) {
                entry.recalled.insert(seq);
                entry.mentions.remove(&seq);
            }
            if counts && listed && entry.counted().unread < before.unread {
                dropped += 1;
            }
        }
        if let Some(answer) = self.service("/v1/recall", body.clone()).await
            && !self.sql()
        {
            assert_eq!(answer.body["changed"], dropped, "{} recall {id} {seq}", self.tenant);
        }
    }

    /// A recall sent again later, by the queue.
    async fn send_recall_again(&mut self) {
        if self.recalls_again.is_empty() {
            return;
        }
        let j = self.rng.random_range(0..self.recalls_again.len());
        let (i, body) = self.recalls_again.swap_remove(j);
        self.send_recall(i, &body).await;
    }

    /// A member mutes, unmutes, pins, unpins or marks unread.
    async fn flag(&mut self) {
        let Some(i) = self.live() else { return };
        let c = &self.conversations[i];
        let Some(user) = c.members.choose(&mut self.rng).cloned() else { return };
        let id = c.id.clone();
        let (action, body) = match self.rng.random_range(0..5) {
            0 | 1 => ("mute", json!({"muted": self.rng.random_bool(0.6)})),
            2 | 3 => ("pin", json!({"pinned": self.rng.random_bool(0.5)})),
            _ => ("mark-unread", json!({})),
        };
        let answer = loop {
            let answer = self.shared.app.flag(&self.tenant, &user, &id, action, body.clone()).await;
            self.trace(|| format!("{action} {user} {id} {body} -> {} {}", answer.status, answer.body));
            if answer.status != 503 {
                break answer;
            }
            self.timed_out().await;
        };
        self.shared.count("flags");
        let pins = self.model.views.get(&user).map_or(0, |v| v.values().filter(|e| e.pinned && !e.gone).count());
        let Some(entry) = self.model.views.get_mut(&user).and_then(|v| v.get_mut(&id)).filter(|e| e.shows()) else {
            assert_eq!(answer.status, 404, "{} {action} {user} {id}: {:?}", self.tenant, answer.body);
            return;
        };
        match action {
            "mute" => entry.muted = body["muted"] == true,
            "pin" if body["pinned"] == true && !entry.pinned && pins >= MAX_PINS => {
                assert_eq!(answer.status, 409, "{:?}", answer.body);
                return;
            }
            "pin" => entry.pinned = body["pinned"] == true,
            _ => entry.marked = true,
        }
        let row = entry.row(&id, self.model.heads.get(&id));
        assert_eq!(answer.status, 200, "{} {action} {user} {id}: {:?}", self.tenant, answer.body);
        let got = self.model.as_modelled(&answer.body["conversation"]);
        assert_eq!(got, row, "{} {action} {user} {id}", self.tenant);
        self.check_badge(&user, &answer.body["badge"], action);
        self.check_events().await;
    }

    /// Someone who is not a member joins after the last message.
    async fn join(&mut self) {
        let Some(i) = self.live() else { return };
        let outside: Vec<String> =
            self.users.iter().filter(|u| !self.conversations[i].members.contains(u)).cloned().collect();
        let Some(user) = outside.choose(&mut self.rng).cloned() else { return };
        if self.conversations[i].last == 0 {
            return;
        }
        let c = &mut self.conversations[i];
        c.members.push(user.clone());
        let (id, seq) = (c.id.clone(), c.last);
        if let Some(store) = &self.shared.store {
            store.add_member(&self.tenant, &id, &user).await;
        }
        let sql = self.sql();
        let c = &self.conversations[i];
        let head = if sql {
            (c.category.to_string(), c.last, c.score)
        } else {
            // Cache-only, the service's head is the newest touch it was given.
            let delivered = self.model.heads.get(&id).cloned().unwrap_or_default();
            (delivered.category, delivered.seq, delivered.score)
        };
        let entry = self.model.entry(&user, &id);
        if entry.gone || sql {
            *entry = Entry::default();
        }
        entry.read = entry.read.max(seq);
        if head.1 > 0 && (sql || entry.last == 0) {
            // The conversation is listed at once, with its last message: with
            // SQL the member is rebuilt from the truth; without, a member
            // with no message of it yet gets the head's.
            (entry.category, entry.last, entry.score) = head;
        }
        let c = &mut self.conversations[i];
        if !c.large {
            c.joined.insert(user.clone());
        }
        if c.large {
            // The member catches up with the whole log: its recalls too.
            c.reach.insert(user.clone());
            let logged: Vec<u64> = c.logged_recalls.iter().copied().collect();
            let entry = self.model.entry(&user, &id);
            for seq in logged {
                if seq > entry.read && entry.recalled.insert(seq) {
                    entry.mentions.remove(&seq);
                }
            }
        }
        self.service("/v1/join", json!({"tenant": self.tenant, "conversation": id, "seq": seq, "members": [user]}))
            .await;
        self.shared.count("joins");
    }

    /// A member leaves.
    async fn leave(&mut self) {
        let Some(i) = self.live() else { return };
        let c = &mut self.conversations[i];
        if c.members.len() < 2 {
            return;
        }
        let user = c.members.remove(self.rng.random_range(0..c.members.len()));
        c.reach.remove(&user);
        c.joined.remove(&user);
        let id = c.id.clone();
        if let Some(store) = &self.shared.store {
            store.remove_member(&self.tenant, &id, &user).await;
        }
        self.forget(&user, &id);
        self.service("/v1/leave", json!({"tenant": self.tenant, "conversation": id, "members": [user]})).await;
        self.shared.count("leaves");
    }

    /// A member's state of a conversation goes; a tombstone stays (without
    /// SQL, for a user who has some state at all: a call leaves no keys for
    /// a user that holds nothing).
    fn forget(&mut self, user: &str, conversation: &str) {
        let known = self.model.views.get(user).is_some_and(|view| !view.is_empty());
        if known || self.sql() {
            *self.model.entry(user, conversation) = Entry { gone: true, ..Entry::default() };
        }
    }

    async fn delete(&mut self) {
        if self.conversations.iter().filter(|c| c.deleted).count() >= 3 {
            return;
        }
        let Some(i) = self.live() else { return };
        let c = &mut self.conversations[i];
        c.deleted = true;
        let (id, members) = (c.id.clone(), std::mem::take(&mut c.members));
        if let Some(store) = &self.shared.store {
            store.delete_conversation(&self.tenant, &id).await;
        }
        for member in &members {
            self.forget(member, &id);
        }
        let path = format!("/v1/admin/conversations/{id}/delete");
        self.service(&path, json!({"tenant": self.tenant, "members": members})).await;
        self.shared.count("deletes");
    }

    /// Every event the last call published carries the model's numbers
    /// after that call, and every user whose badge moved got one.
    async fn check_events(&mut self) {
        let before =
            std::mem::replace(&mut self.told, self.users.iter().map(|u| (u.clone(), self.model.totals(u))).collect());
        let Some(events) = self.events.as_mut() else {
            // A subscription a Redis restart broke is taken up again (what was
            // published meanwhile is lost, as for any subscriber).
            self.events = Events::try_subscribe(&self.shared.app, &self.tenant);
            return;
        };
        let Some(events) = events.try_take() else {
            self.events = None;
            return;
        };
        let mut told = BTreeSet::new();
        self.trace(|| format!("events {events:?}"));
        if std::mem::take(&mut self.unsure) {
            // What a timed-out call published came with these: not checked.
            return;
        }
        for event in &events {
            let Some(user) = event["user"].as_str() else {
                // A large conversation's message or recall: one event for all
                // the members it reaches (a push gateway reads their badges).
                let id = event["conversation"].as_str().unwrap();
                let c = self.conversations.iter().find(|c| c.id == id).unwrap();
                assert!(c.large, "{} event {event}: the conversation is not large", self.tenant);
                assert_eq!(event["large"], true, "{} event {event}", self.tenant);
                told.extend(c.reach.iter().cloned());
                continue;
            };
            told.insert(user.to_string());
            assert_eq!(event["badge"], self.model.totals(user), "{} event {event}", self.tenant);
            if let Some(conversation) = event["conversation"].as_str() {
                let counted = self.model.get(user, conversation).map(Entry::counted).unwrap_or_default();
                assert_eq!(
                    (event["unread"].as_u64(), event["mentions"].as_u64()),
                    (Some(counted.unread), Some(counted.mentions)),
                    "{} event {event}",
                    self.tenant
                );
            }
        }
        for user in &self.users {
            let moved = before.get(user).is_some_and(|b| *b != self.model.totals(user));
            if moved && !self.shared.down.load(SeqCst) {
                assert!(told.contains(user), "{}: {user}'s badge moved and no event said so: {events:?}", self.tenant);
            }
        }
        self.shared.count("events");
    }
}
