//! Redis Cluster (`redis_cluster = true`): `redis_url` names any node; the
//! core learns which primary serves which hash slot, keeps one connection
//! per node per instance, and sends every script part to the node that owns
//! its slot.
//!
//! - The slot map comes from `CLUSTER NODES`: one bulk string (Spin flattens
//!   nested replies, which would lose `CLUSTER SLOTS`' structure).
//! - A call whose keys span slots runs in parts, one per slot, concurrently
//!   ([`crate::script::Call::parts`]); the script combines their replies.
//! - A part whose users are members of large conversations (read
//!   diffusion) first answers which of those conversations' heads and logs
//!   it needs, writing nothing; they are read from their own slots, and the
//!   part runs again with them (`take_logs` in `prelude.lua`).
//! - `MOVED`: the slot moved for good; the map is read again, the part goes
//!   to the new owner. `ASK`: the slot is moving and this key already went;
//!   `ASKING` and the part go on a connection of their own, since Spin's
//!   connections pipeline concurrent commands and another could slip in
//!   between the two. `TRYAGAIN` (a multi-key part while its slot moves),
//!   `CLUSTERDOWN` (a failover under way), `LOADING` and `MASTERDOWN` wait
//!   and retry. A node that stops answering is dropped and the map read
//!   again from another. All within the script's deadline: past it, the
//!   call is unavailable (503), never a guess.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use spin_sdk::redis::{Connection, Error as RedisError, RedisParameter, RedisResult};

use crate::Error;
use crate::cached::timed;
use crate::keys::{clock_in, slot};
use crate::redis::{eval, params, replicas_for, unavailable, wait_for_replicas};
use crate::script::{Call, ELSEWHERE, Lua, Part, PartReply, Reply, Script, malformed};
use crate::scripts::{GroupLogs, LogsWanted, NO_LOGS_YET, Ping, WantedLog, logs_wanted};

thread_local! {
    /// The slot map this instance uses; none until first needed, or after a
    /// failure that makes it suspect.
    static MAP: RefCell<Option<Rc<SlotMap>>> = const { RefCell::new(None) };
    /// How often a failure dropped the map: a map read after one needs the
    /// instance opened again (see [`unopened`]).
    static DROPS: Cell<u64> = const { Cell::new(0) };
    /// `DROPS` when the instance was last opened; none before.
    static OPENED_AT: Cell<Option<u64>> = const { Cell::new(None) };
    /// One connection per node, by `host:port`.
    static NODES: RefCell<HashMap<String, Rc<Connection>>> = RefCell::new(HashMap::new());
}

/// How often one part follows a redirect or waits out a moving slot before
/// it gives up (within the deadline in any case).
const MAX_ATTEMPTS: usize = 8;

/// How long one node may take to give its slot map.
const MAP_READ_DEADLINE: Duration = Duration::from_millis(500);

/// The wait before trying again a part whose slot is moving or whose
/// cluster is failing over.
const RETRY_WAIT: Duration = Duration::from_millis(50);

/// Which primary serves which slots.
#[derive(Debug, PartialEq, Eq)]
pub struct SlotMap {
    /// `(first, last, node)`, sorted by first slot.
    ranges: Vec<(u16, u16, String)>,
    /// Every primary that serves a slot, sorted: what a walk goes through.
    primaries: Vec<String>,
}

impl SlotMap {
    /// Reads the text of `CLUSTER NODES`: one line per node, `id
    /// ip:port@cport[,hostname] flags primary ping pong epoch link slots...`.
    /// Primaries that are failed or have no address are left out; so are
    /// slots being imported or migrated (`[...]`), which their owner still
    /// serves.
    pub fn parse(text: &str) -> Result<SlotMap, String> {
        let mut ranges = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 {
                return Err(format!("unexpected CLUSTER NODES line: {line:?}"));
            }
            let flags: Vec<&str> = fields[2].split(',').collect();
            if !flags.contains(&"master") || flags.iter().any(|f| matches!(*f, "fail" | "noaddr" | "handshake")) {
                continue;
            }
            let Some(node) = address(fields[1]) else { continue };
            for slots in &fields[8..] {
                if slots.starts_with('[') {
                    continue;
                }
                let (first, last) = slots.split_once('-').unwrap_or((slots, slots));
                let (Ok(first), Ok(last)) = (first.parse::<u16>(), last.parse::<u16>()) else {
                    return Err(format!("unexpected slots {slots:?} in CLUSTER NODES"));
                };
                ranges.push((first, last, node.clone()));
            }
        }
        if ranges.is_empty() {
            return Err("CLUSTER NODES names no primary serving slots".into());
        }
        ranges.sort();
        let mut primaries: Vec<String> = ranges.iter().map(|(_, _, node)| node.clone()).collect();
        primaries.sort();
        primaries.dedup();
        Ok(SlotMap { ranges, primaries })
    }

    /// Whether a primary serves every one of the 16 384 slots: a cluster
    /// that leaves one unserved refuses its keys (and by default, with
    /// `cluster-require-full-coverage`, every key).
    pub fn serves_every_slot(&self) -> bool {
        let mut next = 0u32;
        for (first, last, _) in &self.ranges {
            if u32::from(*first) > next {
                return false;
            }
            next = next.max(u32::from(*last) + 1);
        }
        next == 16_384
    }

    /// Which primary serves which slots, as one number (FNV-1a over the
    /// ranges): two maps with the same layout send every key to the same
    /// node. Stable across builds, since walk cursors carry it.
    pub fn layout(&self) -> u64 {
        let ranges = self.ranges.iter().map(|(first, last, node)| format!("{first}-{last}={node};"));
        ranges.fold(FNV_START, |hash, range| fnv(hash, &range))
    }

    /// The node that serves `slot`, if any does.
    pub fn node(&self, slot: u16) -> Option<&str> {
        let at = self.ranges.partition_point(|(first, _, _)| *first <= slot);
        let (_, last, node) = self.ranges.get(at.checked_sub(1)?)?;
        (slot <= *last).then_some(node.as_str())
    }
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `text`, going on from `hash`.
fn fnv(hash: u64, text: &str) -> u64 {
    text.bytes().fold(hash, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// Whether the node whose `CLUSTER NODES` this is moves a slot out or in
/// (`[slot->-id]`, `[slot-<-id]` on its `myself` line): only the node
/// itself tells, and its keys of that slot go one batch at a time.
pub fn moves_slots(text: &str) -> bool {
    text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).any(|fields| {
        fields.get(2).is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
            && fields.iter().skip(8).any(|slots| slots.starts_with('['))
    })
}

/// A node's `host:port` from its CLUSTER NODES address
/// (`ip:port@cport[,hostname]`): the hostname when the node announces one
/// (TLS certificates name it), else the IP.
fn address(field: &str) -> Option<String> {
    let (ip_port, rest) = field.split_once('@').unwrap_or((field, ""));
    let hostname = rest.split_once(',').map(|(_, h)| h).filter(|h| !h.is_empty());
    let (ip, port) = ip_port.rsplit_once(':')?;
    if ip.is_empty() || port == "0" {
        return None;
    }
    let host = hostname.unwrap_or(ip);
    Some(if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") })
}

/// `redis_url` with its host and port replaced by `node`'s: the same
/// scheme (TLS or not), user and password.
pub fn node_url(seed: &str, node: &str) -> String {
    let (scheme, rest) = seed.split_once("://").unwrap_or(("redis", seed));
    let (userinfo, rest) = match rest.rsplit_once('@') {
        Some((userinfo, rest)) => (format!("{userinfo}@"), rest),
        None => (String::new(), rest),
    };
    let path = rest.find(['/', '?']).map_or("", |at| &rest[at..]);
    // A cluster has database 0 only; keep query options, drop a path.
    let query = path.find('?').map_or("", |at| &path[at..]);
    format!("{scheme}://{userinfo}{node}{query}")
}

/// What a node's error asks of the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Redirect {
    /// The slot is served by `node` now.
    Moved { node: String },
    /// This key of a moving slot is at `node`: ask it, once.
    Ask { node: String },
    /// Wait and try again (a slot moving, a failover, a node loading).
    Retry,
}

/// Reads a redirect out of an error's text, in the forms redis-rs gives it
/// (`MOVED 3999 127.0.0.1:6381`, `An error was signalled by the server -
/// Moved: 3999 127.0.0.1:6381`).
pub fn redirect(text: &str) -> Option<Redirect> {
    let words: Vec<&str> = text.split_whitespace().map(|w| w.trim_end_matches(':')).collect();
    for (i, word) in words.iter().enumerate() {
        let lower = word.to_ascii_lowercase();
        if matches!(lower.as_str(), "tryagain" | "clusterdown" | "loading" | "masterdown") {
            return Some(Redirect::Retry);
        }
        if lower == "moved" || lower == "ask" {
            let (Some(slot), Some(node)) = (words.get(i + 1), words.get(i + 2)) else { continue };
            if slot.parse::<u16>().is_err() || !node.contains(':') {
                continue;
            }
            let node = node.to_string();
            return Some(if lower == "moved" { Redirect::Moved { node } } else { Redirect::Ask { node } });
        }
    }
    None
}

/// Runs `script` on the cluster: its parts at once, each on its slot's
/// node, the parts of one node's slots as one call.
pub async fn run<S: Script>(script: &S) -> Result<S::Reply, Error> {
    let mut call = crate::script::Call::default();
    script.encode(&mut call);
    let logs_at = call.logs_at();
    if let Some(at) = logs_at {
        call.args[at] = NO_LOGS_YET.as_bytes().to_vec();
    }
    // The clocks live in other slots: this client keeps them (see give_logs).
    let clocks = call.clocks_at().map(|at| std::mem::take(&mut call.args[at]));
    let conversations = call.conversations().map(<[u8]>::to_vec);
    // The parts of the slots one node serves go as one call, by the map
    // the instance has (none yet: one part per slot, which reads it).
    let parts = match MAP.with_borrow(|m| m.clone()) {
        Some(map) => call.parts_together(|slot| map.node(slot).map(str::to_string))?,
        None => call.parts()?,
    };
    let until = Instant::now() + S::DEADLINE;
    let sent = Sent::Script(S::lua(), replicas_for::<S>().await?);
    let mut ran: Vec<Ran> = run_parts(sent, parts, until).await?.into_iter().flatten().collect();
    if let Some(at) = logs_at {
        let names = Names { clocks: text_of(&clocks), conversations: text_of(&conversations) };
        ran = give_logs(sent, ran, at, &names, until).await?;
    }
    let done = ran.into_iter().map(|(part, values)| PartReply { items: part.items, reply: Reply::new(values) });
    script.merge(done.collect())
}

/// The items of `script`'s call that the node serving its fixed keys also
/// serves, by the instance's slot map (none without a map or fixed keys):
/// those that would go in one call with the fixed keys.
pub fn items_beside_fixed_keys<S: Script>(script: &S) -> Vec<usize> {
    let Some(map) = MAP.with_borrow(|m| m.clone()) else { return Vec::new() };
    let mut call = Call::default();
    script.encode(&mut call);
    let parts = call.parts_together(|slot| map.node(slot).map(str::to_string)).unwrap_or_default();
    parts.into_iter().find(|part| part.with_fixed_keys).map(|part| part.items).unwrap_or_default()
}

/// A part as it ran, and its node's reply.
type Ran = (Part, Vec<RedisResult>);

/// Runs every part at once. A part that joins several slots' parts and
/// that its node turns away (a slot moved or is moving, the node failed)
/// runs again as those parts, each following its own redirects; for each
/// part in order, what ran of it (itself, or its pieces).
async fn run_parts(sent: Sent, parts: Vec<Part>, until: Instant) -> Result<Vec<Vec<Ran>>, Error> {
    let outcomes = all(parts.iter().map(|part| async move {
        match part.is_joined() {
            true => run_joined(sent, part, until).await,
            false => run_part(sent, part, until).await.map(Some),
        }
    }))
    .await;
    let mut ran: Vec<Vec<Ran>> = Vec::with_capacity(parts.len());
    let mut turned_away: Vec<(usize, Part)> = Vec::new();
    for (part, outcome) in parts.into_iter().zip(outcomes) {
        match outcome? {
            Some(values) => ran.push(vec![(part, values)]),
            None => {
                turned_away.extend(part.split().into_iter().map(|piece| (ran.len(), piece)));
                ran.push(Vec::new());
            }
        }
    }
    let again = all(turned_away.iter().map(|(_, piece)| run_part(sent, piece, until))).await;
    for ((at, piece), values) in turned_away.into_iter().zip(again) {
        ran[at].push((piece, values?));
    }
    Ok(ran)
}

/// A joined part, once, on the node the map says serves its slots: its
/// reply, or none if the node turned it away unwritten (`keys_and_args` in
/// `prelude.lua` found a key it does not serve; or a redirect) or could not
/// be reached. A script that failed otherwise fails the call, as a part of
/// one slot does.
async fn run_joined(sent: Sent, part: &Part, until: Instant) -> Result<Option<Vec<RedisResult>>, Error> {
    let node =
        MAP.with_borrow(|map| map.as_ref().zip(part.slot).and_then(|(map, slot)| map.node(slot).map(str::to_string)));
    let Some(node) = node else { return Ok(None) };
    let params = params(&[], &part.joined_args());
    deadline(until, async {
        match on_node(&node, sent, &params).await {
            Ok(values) => Ok(Some(values)),
            Err(Failure::Script(text)) if text.contains(ELSEWHERE) || redirect(&text).is_some() => Ok(None),
            Err(Failure::Script(text)) => Err(unavailable(sent.name(), &text)),
            Err(Failure::Down(_)) => Ok(None),
        }
    })
    .await
}

/// A fixed argument as text ('' if none).
fn text_of(arg: &Option<Vec<u8>>) -> &str {
    arg.as_deref().and_then(|a| std::str::from_utf8(a).ok()).unwrap_or_default()
}

/// A cluster call made while running another (boxed: [`run`] calls itself).
type Nested<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + 'a>>;

/// How the names of a call's tenant's keys begin: its clocks
/// ([`crate::keys::clocks_prefix`]) and its conversations
/// ([`crate::keys::conversations_prefix`]).
struct Names<'a> {
    clocks: &'a str,
    conversations: &'a str,
}

/// The parts whose users are members of large conversations (whose heads
/// and logs live in other slots) asked for those first, writing nothing:
/// the conversations' clocks (named from `names`) are read, every log
/// whose clock moved past how far the users caught up is read once, from
/// its own slot, and those parts run again with theirs (see `take_logs` in
/// `prelude.lua`; a log not given has nothing new for them). A part whose
/// logs none moved, and that answered what it answers then (one user's
/// badge), is done: nothing was owed when it ran, since a clock moves after
/// its log and never back (unless the log is new, which its counter tells).
async fn give_logs(sent: Sent, ran: Vec<Ran>, at: usize, names: &Names<'_>, until: Instant) -> Result<Vec<Ran>, Error> {
    let mut asked: HashMap<usize, LogsWanted> = HashMap::new();
    for (index, (_, values)) in ran.iter().enumerate() {
        if let Some(wanted) = logs_wanted(values)? {
            asked.insert(index, wanted);
        }
    }
    if asked.is_empty() {
        return Ok(ran);
    }
    let mut wanted: Vec<String> = asked.values().flat_map(|w| &w.logs).map(|w| w.conversation.clone()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let named: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let counters = read_clocks(names.clocks, &named, until).await?;
    let clocks: HashMap<&str, Option<u64>> = named.into_iter().zip(counters).collect();
    let unmoved = |log: &WantedLog| clocks.get(log.conversation.as_str()) == Some(&Some(log.after));
    // Each part keeps its place (a rerun's pieces, the place of the part
    // they came from), so that the reply merges as the call was made.
    let mut done: Vec<(usize, Ran)> = Vec::new();
    let (mut again, mut again_at, mut logs_of) = (Vec::new(), Vec::new(), Vec::new());
    for (index, (part, values)) in ran.into_iter().enumerate() {
        match asked.remove(&index) {
            None => done.push((index, (part, values))),
            Some(LogsWanted { logs, standing: Some(from) }) if logs.iter().all(unmoved) => {
                done.push((index, (part, values[from..].to_vec())));
            }
            Some(LogsWanted { logs, .. }) => {
                again.push(part);
                again_at.push(index);
                logs_of.push(logs);
            }
        }
    }
    if again.is_empty() {
        return Ok(done.into_iter().map(|(_, ran)| ran).collect());
    }
    // Each log that moved once, from the least far any of the users caught up.
    let mut moved: Vec<WantedLog> = Vec::new();
    let mut position: HashMap<&str, usize> = HashMap::new();
    for log in logs_of.iter().flatten().filter(|log| !unmoved(log)) {
        match position.get(log.conversation.as_str()) {
            Some(&at) => moved[at].after = moved[at].after.min(log.after),
            None => {
                position.insert(&log.conversation, moved.len());
                moved.push(log.clone());
            }
        }
    }
    let mut lines: HashMap<String, String> = HashMap::new();
    if !moved.is_empty() {
        let logs = GroupLogs { conversations: names.conversations, wanted: &moved };
        // Boxed: reading the logs runs scripts on the cluster too.
        let read: Nested<'_, Vec<String>> = Box::pin(run(&logs));
        lines = moved.iter().map(|w| w.conversation.clone()).zip(read.await?).collect();
    }
    for (part, logs) in again.iter_mut().zip(&logs_of) {
        let given = logs.iter().filter_map(|w| lines.get(&w.conversation).cloned()).collect();
        part.call.args[at] = GroupLogs::argument(given);
    }
    for (index, pieces) in again_at.into_iter().zip(run_parts(sent, again, until).await?) {
        for (piece, values) in pieces {
            if logs_wanted(&values)?.is_some() {
                return Err(crate::script::malformed());
            }
            done.push((index, (piece, values)));
        }
    }
    done.sort_by_key(|(index, _)| *index);
    Ok(done.into_iter().map(|(_, ran)| ran).collect())
}

/// The log counters of large `conversations` as their clocks (named from
/// `clocks`, the tenant's clock prefix) hold them; none where a clock holds
/// nothing. One plain `HMGET` per clock key, all at once: a script per key
/// cost Redis some fifteen times the command (its text run anew, its
/// arguments named), and a member of many large conversations reads all 16
/// keys on every call.
async fn read_clocks(clocks: &str, conversations: &[&str], until: Instant) -> Result<Vec<Option<u64>>, Error> {
    let mut parts: Vec<Part> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for (index, conversation) in conversations.iter().enumerate() {
        let key = clock_in(clocks, conversation);
        let at = *by_key.entry(key.clone()).or_insert_with(|| {
            let mut call = Call::default();
            call.keys.push(key.clone());
            parts.push(Part::in_slot(slot(&key), Vec::new(), call));
            parts.len() - 1
        });
        parts[at].items.push(index);
        parts[at].call.args.push(conversation.as_bytes().to_vec());
    }
    let mut counters = vec![None; conversations.len()];
    let replies = all(parts.iter().map(|part| run_part(Sent::Command("HMGET"), part, until))).await;
    for (part, values) in parts.iter().zip(replies) {
        let values = values?;
        if values.len() != part.items.len() {
            return Err(malformed());
        }
        for (&index, value) in part.items.iter().zip(values) {
            counters[index] = match value {
                RedisResult::Nil => None,
                RedisResult::Binary(text) => {
                    Some(std::str::from_utf8(&text).ok().and_then(|t| t.parse().ok()).ok_or_else(malformed)?)
                }
                _ => return Err(malformed()),
            };
        }
    }
    Ok(counters)
}

/// The values of `keys`, each read with a plain `GET` from its slot's node,
/// all at once; none where a key holds nothing. A list page's previews read
/// their heads so: a script per head cost Redis some ten times the command
/// (its prelude run anew, its arguments named).
pub async fn get_each(keys: &[String], within: Duration) -> Result<Vec<Option<Vec<u8>>>, Error> {
    let until = Instant::now() + within;
    let parts: Vec<Part> = keys
        .iter()
        .enumerate()
        .map(|(index, key)| {
            let mut call = Call::default();
            call.keys.push(key.clone());
            Part::in_slot(slot(key), vec![index], call)
        })
        .collect();
    let replies = all(parts.iter().map(|part| run_part(Sent::Command("GET"), part, until))).await;
    replies
        .into_iter()
        .map(|values| match values?.as_slice() {
            [RedisResult::Nil] => Ok(None),
            [RedisResult::Binary(bytes)] => Ok(Some(bytes.clone())),
            _ => Err(malformed()),
        })
        .collect()
}

/// Runs a script without keys on the `index`th primary (sorted by
/// address), for a walk over every primary's keys; also gives how many
/// primaries there are.
pub async fn run_on_primary<S: Script>(script: &S, index: usize) -> Result<(S::Reply, usize), Error> {
    let mut call = crate::script::Call::default();
    script.encode(&mut call);
    let map = map().await?;
    // A failed primary is not in the map: a walk without its keys would
    // say it is done.
    if !map.serves_every_slot() {
        return Err(Error::Unavailable("redis: a walk needs every slot served, and one is not".into()));
    }
    let Some(node) = map.primaries.get(index).cloned() else {
        return Err(Error::Invalid("cursor is not one this service issued".into()));
    };
    let until = Instant::now() + S::DEADLINE;
    let params = params(&call.keys, &call.args);
    let sent = Sent::Script(S::lua(), replicas_for::<S>().await?);
    let values = deadline(until, async {
        let connection = connection(&node).await.map_err(|e| unavailable(S::lua().file, &e.to_string()))?;
        sent.send(&connection, &node, &params, false).await.map_err(|e| {
            forget(&node);
            unavailable(S::lua().file, &e.to_string())
        })
    })
    .await?;
    Ok((script.decode(&mut Reply::new(values))?, map.primaries.len()))
}

/// The cluster's layout if it is settled: the map read afresh, a primary
/// serving every slot, every primary giving the same map and moving no
/// slot. None while it is not. The number is the map's
/// [`SlotMap::layout`] with every primary's `run_id`: a primary that
/// restarted at its address hashes its keys with a new seed, and a SCAN
/// cursor from before means nothing there. A key moves only with its slot,
/// so a walk that finds the same settled layout before and after its pages
/// saw every key of the primaries it walked. Unavailable when a slot has
/// no primary (a walk would pass over its users) or a primary does not
/// answer.
pub async fn settled_layout() -> Result<Option<u64>, Error> {
    let until = Instant::now() + LAYOUT_DEADLINE;
    deadline(until, async {
        if !refresh(None).await {
            return Err(unavailable("CLUSTER NODES", "no node gave the slot map"));
        }
        let map = map().await?;
        if !map.serves_every_slot() {
            return Err(unavailable("CLUSTER NODES", "no primary serves some slots"));
        }
        let nodes = [RedisParameter::Binary(b"NODES".to_vec())];
        let server = [RedisParameter::Binary(b"server".to_vec())];
        let read = |node: &str, sent: Sent, params: &[RedisParameter]| {
            let node = node.to_string();
            let params = params.to_vec();
            async move {
                match on_node(&node, sent, &params).await {
                    Ok(values) => first_text(values).ok_or_else(malformed),
                    Err(Failure::Script(reason) | Failure::Down(reason)) => {
                        Err(unavailable(sent.name(), &format!("{node}: {reason}")))
                    }
                }
            }
        };
        let views = map.primaries.iter().map(|node| read(node, Sent::Command("CLUSTER"), &nodes));
        let infos = map.primaries.iter().map(|node| read(node, Sent::Command("INFO"), &server));
        let mut texts = all(views.chain(infos)).await;
        let infos = texts.split_off(map.primaries.len());
        let mut layout = map.layout();
        for (view, info) in texts.into_iter().zip(infos) {
            let (view, info) = (view?, info?);
            let same = SlotMap::parse(&view).is_ok_and(|view| view.layout() == map.layout());
            let run_id = info.lines().find_map(|line| line.trim().strip_prefix("run_id:"));
            let Some(run_id) = run_id.filter(|_| same && !moves_slots(&view)) else { return Ok(None) };
            layout = fnv(layout, run_id);
        }
        Ok(Some(layout))
    })
    .await
}

/// How long [`settled_layout`] may take.
const LAYOUT_DEADLINE: Duration = Duration::from_secs(2);

/// The health check on a cluster: the slot map read afresh (from the seed,
/// or any node this instance knows), a primary serving every slot, and
/// every primary running the ping script, all at once, within the check's
/// deadline. Pinging one node would call a cluster healthy with a primary
/// hung or its slots unserved, where calls on those slots fail.
pub async fn ping_every_primary() -> Result<(), Error> {
    let until = Instant::now() + Ping::DEADLINE;
    let lua = Ping::lua();
    // Read afresh without first dropping the instance's map: calls that run
    // meanwhile keep using it (a dropped map is what a new instance has,
    // and would make them open the cluster again).
    if !deadline(until, async { Ok(refresh(None).await) }).await? {
        return Err(unavailable("CLUSTER NODES", "no node gave the slot map"));
    }
    let map = map().await?;
    if !map.serves_every_slot() {
        return Err(unavailable("CLUSTER NODES", "no primary serves some slots"));
    }
    let ping = Sent::Script(lua, 0);
    let params = ping.params(&Call::default());
    let left = until.saturating_duration_since(Instant::now());
    let pings = all(map.primaries.iter().map(|node| timed(left, on_node(node, ping, &params)))).await;
    for (node, ping) in map.primaries.iter().zip(pings) {
        let values = match ping {
            Some(Ok(values)) => values,
            Some(Err(Failure::Script(reason) | Failure::Down(reason))) => {
                return Err(unavailable(lua.file, &format!("{node}: {reason}")));
            }
            None => {
                // What the hung connection still owes is unknown.
                forget(node);
                return Err(unavailable(lua.file, &format!("{node}: no answer within {} ms", left.as_millis())));
            }
        };
        Ping.decode(&mut Reply::new(values))?;
    }
    Ok(())
}

/// What a part sends to its node.
#[derive(Clone, Copy)]
enum Sent {
    /// A script: `EVALSHA`, and `EVAL` once after `NOSCRIPT`; then `WAIT`
    /// for that many replicas (see [`wait_for_replicas`]).
    Script(&'static Lua, u32),
    /// One plain read command, its keys and then its arguments: what this
    /// client reads for itself where no step needs to be atomic.
    Command(&'static str),
}

impl Sent {
    /// What the log names when the part fails.
    fn name(self) -> &'static str {
        match self {
            Sent::Script(lua, _) => lua.file,
            Sent::Command(command) => command,
        }
    }

    /// The parameters of `call` as this sends them.
    fn params(self, call: &Call) -> Vec<RedisParameter> {
        match self {
            Sent::Script(..) => params(&call.keys, &call.args),
            Sent::Command(_) => {
                let keys = call.keys.iter().map(|key| key.as_bytes().to_vec());
                keys.chain(call.args.iter().cloned()).map(RedisParameter::Binary).collect()
            }
        }
    }

    /// Sends it on `connection` to `node` (after `ASKING`, if `asking`).
    async fn send(
        self,
        connection: &Connection,
        node: &str,
        params: &[RedisParameter],
        asking: bool,
    ) -> Result<Vec<RedisResult>, RedisError> {
        match self {
            Sent::Script(lua, replicas) => {
                let values = eval(connection, lua, params, asking).await?;
                // The script ran: whatever fails now must not send it again
                // (its second run would answer as a replay).
                wait_for_replicas(connection, node, replicas)
                    .await
                    .map_err(|error| RedisError::Other(format!("{AFTER_THE_SCRIPT}{error}")))?;
                Ok(values)
            }
            Sent::Command(command) => {
                if asking {
                    connection.execute("ASKING", Vec::new()).await?;
                }
                connection.execute(command, params.to_vec()).await
            }
        }
    }
}

/// One part, to its slot's node, following redirects.
async fn run_part(sent: Sent, part: &Part, until: Instant) -> Result<Vec<RedisResult>, Error> {
    let params = sent.params(&part.call);
    deadline(until, async {
        // Where a redirect sent the part: (node, with ASKING).
        let mut sent_to: Option<(String, bool)> = None;
        let mut last_error = String::new();
        for _ in 0..MAX_ATTEMPTS {
            let outcome = match sent_to.take() {
                Some((node, true)) => asking(&node, sent, &params).await,
                Some((node, false)) => on_node(&node, sent, &params).await,
                None => {
                    let map = map().await.map_err(|e| e.to_string());
                    let node = map.and_then(|map| match part.slot {
                        Some(slot) => map.node(slot).map(str::to_string).ok_or_else(|| format!("slot {slot} unserved")),
                        None => map.primaries.first().cloned().ok_or_else(|| "no primary".to_string()),
                    });
                    match node {
                        Ok(node) => on_node(&node, sent, &params).await,
                        Err(reason) => Err(Failure::Down(reason)),
                    }
                }
            };
            match outcome {
                Ok(values) => return Ok(values),
                Err(Failure::Script(text)) => match redirect(&text) {
                    Some(Redirect::Moved { node }) => {
                        // The map is read again for the calls to come; this
                        // part goes where the node said, even if the map
                        // read lags behind.
                        last_error = text;
                        refresh(Some(&node)).await;
                        sent_to = Some((node, false));
                    }
                    Some(Redirect::Ask { node }) => sent_to = Some((node, true)),
                    Some(Redirect::Retry) => {
                        last_error = text;
                        spin_sdk::time::sleep(RETRY_WAIT).await;
                    }
                    None => return Err(unavailable(sent.name(), &text)),
                },
                Err(Failure::Down(reason)) => {
                    last_error = reason;
                    drop_map();
                    spin_sdk::time::sleep(RETRY_WAIT).await;
                }
            }
        }
        Err(unavailable(sent.name(), &format!("gave up after {MAX_ATTEMPTS} attempts: {last_error}")))
    })
    .await
}

/// How the error of a part begins when its script ran and what followed it
/// (the wait for replicas) failed: the part fails, unavailable, and is not
/// sent again.
const AFTER_THE_SCRIPT: &str = "after the script ran: ";

/// Why a part did not run on a node.
enum Failure {
    /// The node answered with an error (a redirect among them).
    Script(String),
    /// The node could not be reached or dropped the connection.
    Down(String),
}

/// Sends the part on `node`'s connection. A connection that failed is
/// dropped, so the next attempt opens another.
async fn on_node(node: &str, sent: Sent, params: &[RedisParameter]) -> Result<Vec<RedisResult>, Failure> {
    let connection = connection(node).await.map_err(|e| Failure::Down(e.to_string()))?;
    match sent.send(&connection, node, params, false).await {
        Ok(values) => Ok(values),
        Err(RedisError::Other(text)) if text.starts_with(AFTER_THE_SCRIPT) => {
            if is_connection_error(&text) {
                forget(node);
            }
            Err(Failure::Script(text))
        }
        Err(RedisError::Other(text)) if redirect(&text).is_some() || !is_connection_error(&text) => {
            Err(Failure::Script(text))
        }
        Err(error) => {
            forget(node);
            Err(Failure::Down(error.to_string()))
        }
    }
}

/// `ASKING`, then the part, on a connection of its own (see the module
/// doc).
async fn asking(node: &str, sent: Sent, params: &[RedisParameter]) -> Result<Vec<RedisResult>, Failure> {
    let url = node_url(&seed_url().await.map_err(|e| Failure::Down(format!("{e:?}")))?, node);
    let connection = Connection::open(&url).await.map_err(|e| Failure::Down(e.to_string()))?;
    sent.send(&connection, node, params, true).await.map_err(|e| match e {
        RedisError::Other(text) => Failure::Script(text),
        other => Failure::Down(other.to_string()),
    })
}

/// Whether an error's text is the connection's, not the command's.
fn is_connection_error(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["broken pipe", "connection", "io error", "timed out", "eof", "reset", "refused"].iter().any(|w| lower.contains(w))
}

/// Whether the instance is not open: it has not used the cluster yet, or a
/// failure dropped the map since it was opened (what a new connection is to
/// standalone Redis). A map alone does not open it: a call that comes while
/// another opens it (the map read, the stale marks not yet applied) opens
/// it too, rather than answer from what the marks would have dropped.
pub fn unopened() -> bool {
    MAP.with_borrow(Option::is_none) || OPENED_AT.get() != Some(DROPS.get())
}

/// What an opening started now passes to [`opened`].
pub fn opening() -> u64 {
    DROPS.get()
}

/// The instance is open, unless a failure dropped the map since `opening`.
pub fn opened(opening: u64) {
    if DROPS.get() == opening {
        OPENED_AT.set(Some(opening));
    }
}

/// The instance's slot map, read if it has none.
pub async fn map() -> Result<Rc<SlotMap>, Error> {
    if let Some(map) = MAP.with_borrow(|m| m.clone()) {
        return Ok(map);
    }
    refresh(None).await;
    MAP.with_borrow(|m| m.clone()).ok_or_else(|| Error::Unavailable("redis: no cluster slot map".into()))
}

/// Reads the slot map again: from `from` if given, else from the seed
/// (`redis_url`), else from any node this instance knows; each within
/// [`MAP_READ_DEADLINE`], so that a node that hangs is passed over.
/// Returns whether one gave it (else the instance keeps the map it had).
async fn refresh(from: Option<&str>) -> bool {
    let known: Vec<String> = NODES.with_borrow(|nodes| nodes.keys().cloned().collect());
    let mut sources: Vec<Option<String>> = from.map(|n| Some(n.to_string())).into_iter().collect();
    sources.push(None);
    sources.extend(known.into_iter().map(Some));
    for source in sources {
        let read = timed(MAP_READ_DEADLINE, read_map(source.as_deref())).await.flatten();
        if let Some(map) = read {
            MAP.with_borrow_mut(|m| *m = Some(Rc::new(map)));
            return true;
        }
        if let Some(node) = &source {
            forget(node);
        }
    }
    false
}

/// The slot map as `source` (none: the seed) gives it.
async fn read_map(source: Option<&str>) -> Option<SlotMap> {
    let connection = match source {
        Some(node) => connection(node).await.ok()?,
        None => Rc::new(Connection::open(&seed_url().await.ok()?).await.ok()?),
    };
    let values = connection.execute("CLUSTER", vec![RedisParameter::Binary(b"NODES".to_vec())]).await.ok()?;
    let text = first_text(values)?;
    let map = SlotMap::parse(&text).map_err(|reason| eprintln!("unread: error: redis cluster: {reason}")).ok()?;
    // The seed's own connection serves as its node's.
    if source.is_none()
        && let Some(myself) = text.lines().find(|l| l.split_whitespace().nth(2).is_some_and(|f| f.contains("myself")))
        && let Some(node) = myself.split_whitespace().nth(1).and_then(address)
    {
        NODES.with_borrow_mut(|nodes| {
            nodes.entry(node).or_insert(connection);
        });
    }
    Some(map)
}

/// The text of a command's reply (`CLUSTER NODES`, `INFO`): one bulk
/// string, or a status.
fn first_text(values: Vec<RedisResult>) -> Option<String> {
    match values.into_iter().next() {
        Some(RedisResult::Binary(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Some(RedisResult::Status(text)) => Some(text),
        _ => None,
    }
}

/// The connection to `node`, opened if the instance has none.
async fn connection(node: &str) -> Result<Rc<Connection>, RedisError> {
    if let Some(connection) = NODES.with_borrow(|nodes| nodes.get(node).cloned()) {
        return Ok(connection);
    }
    let seed = seed_url().await.map_err(|e| RedisError::Other(format!("{e:?}")))?;
    let connection = Rc::new(Connection::open(&node_url(&seed, node)).await?);
    NODES.with_borrow_mut(|nodes| nodes.insert(node.to_string(), connection.clone()));
    Ok(connection)
}

/// Drops `node`'s connection.
fn forget(node: &str) {
    NODES.with_borrow_mut(|nodes| nodes.remove(node));
}

/// Drops every connection and the map: after a call that outlived its
/// deadline, what any of them holds is unknown.
fn forget_all() {
    NODES.with_borrow_mut(HashMap::clear);
    drop_map();
}

/// Drops the map after a failure: the next call reads it again and opens
/// the instance again (what a new connection is to standalone Redis).
fn drop_map() {
    MAP.with_borrow_mut(|m| *m = None);
    DROPS.set(DROPS.get() + 1);
}

async fn seed_url() -> Result<String, Error> {
    crate::config::text("redis_url").await?.ok_or_else(|| Error::Unavailable("variable redis_url is not set".into()))
}

/// `call`'s result, or unavailable once `until` passes (every connection
/// is then dropped).
async fn deadline<T>(until: Instant, call: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    let result = timed(until.saturating_duration_since(Instant::now()), call).await;
    result.unwrap_or_else(|| {
        forget_all();
        Err(Error::Unavailable("redis: the cluster did not answer in time".into()))
    })
}

/// Runs every future at once (on the instance's one thread); their results
/// in order.
async fn all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut waiting = false;
        for (future, slot) in pending.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *slot = Some(value),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    done.into_iter().map(|value| value.expect("every future is done")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES_TEXT: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003,node3.example master - 0 1426238318243 3 connected 10923-16383 [10924->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master,fail - 1426238316232 0 5 disconnected 17
";

    #[test]
    fn the_slot_map_is_read_from_cluster_nodes() {
        let map = SlotMap::parse(NODES_TEXT).unwrap();
        assert_eq!(map.node(0), Some("127.0.0.1:30001"));
        assert_eq!(map.node(5460), Some("127.0.0.1:30001"));
        assert_eq!(map.node(5461), Some("127.0.0.1:30002"));
        // A hostname the node announces is what it is reached by.
        assert_eq!(map.node(16383), Some("node3.example:30003"));
        assert_eq!(map.primaries, ["127.0.0.1:30001", "127.0.0.1:30002", "node3.example:30003"]);
        let partial = SlotMap::parse(&NODES_TEXT.replace("5461-10922", "5461-5470")).unwrap();
        assert_eq!(partial.node(5471), None, "a slot no live primary serves");
        assert!(map.serves_every_slot());
        assert!(!partial.serves_every_slot());
        let no_last = SlotMap::parse(&NODES_TEXT.replace("10923-16383", "10923-16382")).unwrap();
        assert!(!no_last.serves_every_slot(), "slot 16383 unserved");
        let no_first = SlotMap::parse(&NODES_TEXT.replace(" 0-5460", " 1-5460")).unwrap();
        assert!(!no_first.serves_every_slot(), "slot 0 unserved");
        let single = SlotMap::parse(&NODES_TEXT.replace(" 0-5460", " 0 1-5460")).unwrap();
        assert!(single.serves_every_slot(), "a slot alone and a range");
        assert!(SlotMap::parse("").is_err());
    }

    #[test]
    fn a_layout_changes_with_any_slot_or_node_and_only_then() {
        let map = SlotMap::parse(NODES_TEXT).unwrap();
        assert_eq!(map.layout(), SlotMap::parse(NODES_TEXT).unwrap().layout());
        let resharded = SlotMap::parse(&NODES_TEXT.replace("0-5460", "0-5459").replace(" 5461-", " 5460-")).unwrap();
        assert_ne!(map.layout(), resharded.layout());
        let failed_over = SlotMap::parse(&NODES_TEXT.replace("127.0.0.1:30002@", "127.0.0.1:30006@")).unwrap();
        assert_ne!(map.layout(), failed_over.layout());
        // A slot moving shows only on the node that moves it.
        assert!(!moves_slots(NODES_TEXT), "the migration shown is another node's");
        assert!(moves_slots(&NODES_TEXT.replace("0-5460", "0-5460 [5460->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]")));
        assert!(moves_slots(&NODES_TEXT.replace("0-5460", "0-5460 [5461-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]")));
    }

    #[test]
    fn a_node_url_keeps_the_seeds_scheme_and_credentials() {
        assert_eq!(node_url("redis://:pw@10.0.0.1:7000", "10.0.0.2:7001"), "redis://:pw@10.0.0.2:7001");
        assert_eq!(node_url("rediss://u:p@seed.example:6380/0", "n2.example:6380"), "rediss://u:p@n2.example:6380");
        assert_eq!(node_url("redis://10.0.0.1:7000", "[::1]:7001"), "redis://[::1]:7001");
    }

    #[test]
    fn redirects_are_read_in_the_forms_redis_rs_gives() {
        let moved = Some(Redirect::Moved { node: "127.0.0.1:6381".into() });
        assert_eq!(redirect("MOVED 3999 127.0.0.1:6381"), moved);
        assert_eq!(redirect("An error was signalled by the server - Moved: 3999 127.0.0.1:6381"), moved);
        assert_eq!(redirect("Moved: 3999 127.0.0.1:6381"), moved);
        assert_eq!(redirect("ASK 3999 127.0.0.1:6382"), Some(Redirect::Ask { node: "127.0.0.1:6382".into() }));
        assert_eq!(
            redirect("An error was signalled by the server - TryAgain: Multiple keys request during rehashing of slot"),
            Some(Redirect::Retry)
        );
        assert_eq!(redirect("CLUSTERDOWN The cluster is down"), Some(Redirect::Retry));
        assert_eq!(redirect("ERR user_script:1: Script attempted to access a non local key"), None);
        assert_eq!(redirect("ERR I will ask you 3 questions"), None);
    }
}
