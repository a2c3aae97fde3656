//! The seam between Rust and Lua: every script is a typed value.
//!
//! Each script in `scripts/` is a `.lua` file whose header declares its
//! calling convention (`declare { keys = ..., args = ..., each = ... }` in
//! `prelude.lua`), and a Rust type beside it that implements [`Script`]: it
//! encodes its keys and named arguments into a [`Call`] and decodes the
//! script's reply. A unit test runs every encoder against its header, and
//! `declare` itself refuses a call whose keys and arguments do not fit, so
//! the two sides cannot drift apart. [`crate::redis::run`] sends a script.

use std::time::Duration;

use spin_sdk::redis::RedisResult;

use crate::Error;

/// A script's full text (the prelude, then the script) and the SHA1 that
/// `EVALSHA` names it by.
pub struct Lua {
    /// The script's file name in `scripts/`.
    pub file: &'static str,
    /// The text sent to Redis.
    pub text: String,
    /// Its SHA1, hex.
    pub sha1: String,
}

/// The prelude every script starts with.
pub const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// The line that ends the prelude's base.
const BASE_END: &str = "-- BASE END\n";

/// The prelude's base (its text up to `BASE END`): the calling convention,
/// heads and clocks. Redis runs a script's whole text on every call, so the
/// scripts that only read heads or clocks, which a call on Redis Cluster
/// runs once per slot, take only this.
pub fn base_prelude() -> &'static str {
    PRELUDE.find(BASE_END).map_or(PRELUDE, |at| &PRELUDE[..at + BASE_END.len()])
}

impl Lua {
    /// The script `file` with the prelude prepended.
    pub fn new(file: &'static str, body: &str) -> Self {
        Self::with(file, PRELUDE, body)
    }

    /// The script `file` with only the prelude's base prepended.
    pub fn on_base(file: &'static str, body: &str) -> Self {
        Self::with(file, base_prelude(), body)
    }

    fn with(file: &'static str, prelude: &str, body: &str) -> Self {
        let text = format!("{prelude}\n{body}");
        let sha1 = sha1_smol::Sha1::from(&text).digest().to_string();
        Lua { file, text, sha1 }
    }
}

/// The [`Lua`] of a file in `scripts/`, built once.
macro_rules! lua {
    ($file:literal) => {{
        static LUA: std::sync::LazyLock<$crate::script::Lua> =
            std::sync::LazyLock::new(|| $crate::script::Lua::new($file, include_str!($file)));
        &*LUA
    }};
    // A script on the prelude's base only (see `base_prelude`).
    (base $file:literal) => {{
        static LUA: std::sync::LazyLock<$crate::script::Lua> =
            std::sync::LazyLock::new(|| $crate::script::Lua::on_base($file, include_str!($file)));
        &*LUA
    }};
}
pub(crate) use lua;

/// A Lua script and its calling convention.
pub trait Script {
    /// The decoded reply.
    type Reply;

    /// How long a call may wait for Redis: the per-user scripts answer in
    /// milliseconds; the batch scripts of reconcile and clear-category get
    /// longer.
    const DEADLINE: Duration = Duration::from_secs(2);

    /// Whether the call waits for `redis_wait_replicas` replicas to hold
    /// what it wrote before it answers: every script that writes what its
    /// caller acknowledges. The reads say no: what they write (a user caught
    /// up with a log) the next call redoes from what is already kept.
    const WAITS_FOR_REPLICAS: bool = true;

    /// The script's text.
    fn lua() -> &'static Lua;

    /// Appends the keys and arguments, as the script's header names them.
    fn encode(&self, call: &mut Call);

    /// Decodes the script's (flattened) reply to this call.
    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error>;

    /// Decodes the replies of a call Redis Cluster ran in parts, one per
    /// hash slot (see [`Call::parts`]). A call of one part decodes as a
    /// whole; each script whose keys span slots says how its parts combine.
    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        let mut parts = parts.into_iter();
        match (parts.next(), parts.next()) {
            (Some(mut one), None) => self.decode(&mut one.reply),
            _ => Err(spans_slots()),
        }
    }
}

/// Decodes each part of a split call as if it were a whole one, for the
/// scripts whose reply combines part by part (sums, concatenations).
pub fn decode_parts<S: Script + ?Sized>(script: &S, parts: Vec<PartReply>) -> Result<Vec<S::Reply>, Error> {
    parts.into_iter().map(|mut part| script.decode(&mut part.reply)).collect()
}

/// The replies of a script that answers one text per item, put back in the
/// items' order.
pub fn texts_by_item(parts: Vec<PartReply>) -> Result<Vec<String>, Error> {
    by_item(parts, Reply::text)
}

/// `texts`, if there are `count` of them (one per item of the call).
pub fn one_text_each(count: usize, texts: Vec<String>) -> Result<Vec<String>, Error> {
    if texts.len() != count {
        return Err(malformed());
    }
    Ok(texts)
}

/// The replies of a script that answers each item in turn (`one` reads an
/// item's answer), put back in the items' order.
pub fn by_item<T>(parts: Vec<PartReply>, mut one: impl FnMut(&mut Reply) -> Result<T, Error>) -> Result<Vec<T>, Error> {
    let mut out: Vec<Option<T>> = Vec::new();
    for mut part in parts {
        for item in part.items {
            if out.len() <= item {
                out.resize_with(item + 1, || None);
            }
            out[item] = Some(one(&mut part.reply)?);
        }
        if !part.reply.is_empty() {
            return Err(malformed());
        }
    }
    out.into_iter().map(|answer| answer.ok_or_else(malformed)).collect()
}

/// The keys and arguments of one script call, with the names they were
/// given (what the unit test compares with the script's header).
#[derive(Default)]
pub struct Call {
    /// `KEYS`, in order.
    pub keys: Vec<String>,
    /// `ARGV`, in order.
    pub args: Vec<Vec<u8>>,
    /// Where the repeated items start, and their shape (see [`Call::each`]).
    items: Option<Items>,
    /// Which argument is `logs` (see [`Call::logs`]).
    logs_at: Option<usize>,
    /// Which argument is `clocks` (see [`Call::clocks`]).
    clocks_at: Option<usize>,
    #[cfg(test)]
    names: Names,
}

/// The repeated items of a call: they follow `fixed_keys` keys and
/// `fixed_args` arguments, each with `keys` keys and `args` arguments.
#[derive(Clone, Copy, Debug)]
struct Items {
    fixed_keys: usize,
    fixed_args: usize,
    keys: usize,
    args: usize,
    count: usize,
}

/// The names a call was encoded with: fixed keys and arguments, then those
/// of one repeated item (recorded in test builds, for the header test).
#[cfg(test)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    /// Fixed keys.
    pub keys: Vec<&'static str>,
    /// Fixed arguments.
    pub args: Vec<&'static str>,
    /// The keys of each item.
    pub each_keys: Vec<&'static str>,
    /// The arguments of each item.
    pub each_args: Vec<&'static str>,
}

/// A value a script takes as an argument.
pub trait Arg {
    /// Its bytes in `ARGV`.
    fn into_arg(self) -> Vec<u8>;
}

impl Arg for &str {
    fn into_arg(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl Arg for String {
    fn into_arg(self) -> Vec<u8> {
        self.into_bytes()
    }
}

impl Arg for &String {
    fn into_arg(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl Arg for u64 {
    fn into_arg(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

impl Arg for u32 {
    fn into_arg(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

/// Flags are '1' or '0'.
impl Arg for bool {
    fn into_arg(self) -> Vec<u8> {
        vec![if self { b'1' } else { b'0' }]
    }
}

impl Call {
    /// A fixed key.
    pub fn key(&mut self, name: &'static str, key: String) {
        self.keys.push(key);
        #[cfg(test)]
        self.names.keys.push(name);
        let _ = name;
    }

    /// A fixed argument.
    pub fn arg(&mut self, name: &'static str, value: impl Arg) {
        self.args.push(value.into_arg());
        #[cfg(test)]
        self.names.args.push(name);
        let _ = name;
    }

    /// The fixed arguments `logs` and `conversations` of a script that
    /// catches `tenant`'s users up with their large conversations
    /// (`take_logs` in `prelude.lua`). `logs` is empty, so that on one Redis
    /// the script reads the conversations' heads and logs itself; on Redis
    /// Cluster, where they live in other slots, the cluster client fills it
    /// in ([`crate::scripts::GroupLogs`]). `conversations`: how the names of
    /// the tenant's conversation keys begin, from which the script names
    /// those of a membership (which holds only a number).
    /// Then `clocks` (see [`Call::clocks`]).
    pub fn logs(&mut self, tenant: &str) {
        self.logs_at = Some(self.args.len());
        self.arg("logs", "");
        self.arg("conversations", crate::keys::conversations_prefix(tenant));
        self.clocks(tenant);
    }

    /// The fixed argument `clocks` of a script that reads or moves the log
    /// counters of `tenant`'s large conversations: how the names of the
    /// tenant's clock keys begin ([`crate::keys::clocks_prefix`]). On one
    /// Redis the script keeps the clocks itself; on Redis Cluster, where
    /// they live in other slots, the cluster client blanks it, reads them
    /// itself (plain `HMGET`s) and moves them ([`crate::scripts::MoveClocks`]).
    pub fn clocks(&mut self, tenant: &str) {
        self.clocks_at = Some(self.args.len());
        self.arg("clocks", crate::keys::clocks_prefix(tenant));
    }

    /// The `conversations` argument (see [`Call::logs`]), if the script
    /// takes one.
    pub fn conversations(&self) -> Option<&[u8]> {
        self.logs_at.map(|at| self.args[at + 1].as_slice())
    }

    /// The index of the `logs` argument, if the script takes one.
    pub fn logs_at(&self) -> Option<usize> {
        self.logs_at
    }

    /// The index of the `clocks` argument, if the script takes one.
    pub fn clocks_at(&self) -> Option<usize> {
        self.clocks_at
    }

    /// One repeated item per element of `items` (after every fixed key and
    /// argument), each encoded by `encode`.
    pub fn each<T>(&mut self, items: impl IntoIterator<Item = T>, mut encode: impl FnMut(&mut Call, T)) {
        let mut shape = Items { fixed_keys: self.keys.len(), fixed_args: self.args.len(), keys: 0, args: 0, count: 0 };
        for (index, item) in items.into_iter().enumerate() {
            let mut one = Call::default();
            encode(&mut one, item);
            (shape.keys, shape.args, shape.count) = (one.keys.len(), one.args.len(), index + 1);
            #[cfg(test)]
            if index == 0 {
                self.names.each_keys = one.names.keys;
                self.names.each_args = one.names.args;
            }
            let _ = index;
            self.keys.extend(one.keys);
            self.args.extend(one.args);
        }
        self.items = Some(shape);
    }

    /// The call as Redis Cluster can run it: one part per hash slot, each
    /// with the items whose keys are in that slot, in their order. The fixed
    /// keys (a conversation's) go with the items of their slot, or alone;
    /// the other parts run without them (the scripts that take both allow
    /// that: `declare` in `prelude.lua`). Every part repeats the fixed
    /// arguments. A call without keys is one part with no slot. Refused: a
    /// call whose fixed keys, or one item's keys, span slots.
    pub fn parts(&self) -> Result<Vec<Part>, Error> {
        let slot_of = |keys: &[String]| -> Result<Option<u16>, Error> {
            let mut slots = keys.iter().map(|k| crate::keys::slot(k));
            let first = slots.next();
            match first {
                Some(s) if slots.any(|other| other != s) => Err(spans_slots()),
                _ => Ok(first),
            }
        };
        let Some(shape) = self.items else {
            let slot = slot_of(&self.keys)?;
            return Ok(vec![Part { slot, with_fixed_keys: true, call: self.copy(), ..Part::default() }]);
        };
        let fixed_slot = slot_of(&self.keys[..shape.fixed_keys])?;
        let mut parts: Vec<Part> = Vec::new();
        let mut part_of_slot = std::collections::HashMap::new();
        if let Some(slot) = fixed_slot {
            part_of_slot.insert(slot, 0);
            parts.push(Part { slot: Some(slot), with_fixed_keys: true, ..Part::default() });
        }
        for item in 0..shape.count {
            let keys = shape.fixed_keys + item * shape.keys..shape.fixed_keys + (item + 1) * shape.keys;
            let slot = slot_of(&self.keys[keys])?;
            let Some(slot) = slot else { return Err(spans_slots()) };
            let index = *part_of_slot.entry(slot).or_insert_with(|| {
                parts.push(Part { slot: Some(slot), ..Part::default() });
                parts.len() - 1
            });
            parts[index].items.push(item);
        }
        for part in &mut parts {
            if part.with_fixed_keys {
                part.call.keys.extend_from_slice(&self.keys[..shape.fixed_keys]);
            }
            part.call.args.extend_from_slice(&self.args[..shape.fixed_args]);
            for &item in &part.items {
                let keys = shape.fixed_keys + item * shape.keys;
                let args = shape.fixed_args + item * shape.args;
                part.call.keys.extend_from_slice(&self.keys[keys..keys + shape.keys]);
                part.call.args.extend_from_slice(&self.args[args..args + shape.args]);
            }
        }
        Ok(parts)
    }

    /// The call as [`Call::parts`] cuts it, then the parts whose slots
    /// `group` puts together (the node that serves them) joined into one:
    /// one script call per node where one per slot would cost a round
    /// trip and a run of the prelude each. A joined part keeps its pieces,
    /// which are sent instead if the node turns it away ([`Part::split`]).
    pub fn parts_together<G: Eq + std::hash::Hash>(
        &self,
        group: impl Fn(u16) -> Option<G>,
    ) -> Result<Vec<Part>, Error> {
        let parts = self.parts()?;
        let Some(shape) = self.items else { return Ok(parts) };
        let mut groups: Vec<Vec<Part>> = Vec::new();
        let mut group_at = std::collections::HashMap::new();
        for part in parts {
            match part.slot.and_then(&group) {
                Some(key) => {
                    let at = *group_at.entry(key).or_insert_with(|| {
                        groups.push(Vec::new());
                        groups.len() - 1
                    });
                    groups[at].push(part);
                }
                None => groups.push(vec![part]),
            }
        }
        Ok(groups.into_iter().map(|pieces| Part::joined(pieces, shape.fixed_args)).collect())
    }

    /// The keys and arguments alone.
    fn copy(&self) -> Call {
        Call { keys: self.keys.clone(), args: self.args.clone(), ..Call::default() }
    }

    /// The names the call was encoded with.
    #[cfg(test)]
    pub fn names(&self) -> &Names {
        &self.names
    }
}

/// One hash slot's part of a call (see [`Call::parts`]), or the parts of
/// several slots joined (see [`Call::parts_together`]).
#[derive(Default)]
pub struct Part {
    /// The slot of its keys (of its first piece's, if joined); none for a
    /// call without keys.
    pub slot: Option<u16>,
    /// Whether it carries the call's fixed keys.
    pub with_fixed_keys: bool,
    /// The items it carries, by their index in the whole call.
    pub items: Vec<usize>,
    /// Its keys and arguments.
    pub call: Call,
    /// The single-slot parts it joins, in order (none for a part of one
    /// slot); the one with the fixed keys first, so that they lead.
    pieces: Vec<Part>,
    /// How many of the call's arguments are fixed (every piece repeats them).
    fixed_args: usize,
}

/// What leads the arguments of a joined part (`NODE_PARTS` in
/// `prelude.lua`): no argument of a script begins with a NUL byte.
pub const NODE_PARTS: &[u8] = b"\0node-parts";

/// The error a node answers to a joined part one of whose keys it does not
/// serve (`keys_and_args` in `prelude.lua`).
pub const ELSEWHERE: &str = "ELSEWHERE";

/// At most this many keys are looked at in one `EXISTS` (a run of a joined
/// part's keys), well inside what Lua's `unpack` takes.
const KEYS_PER_LOOK: usize = 1000;

impl Part {
    /// A part of one slot: `call`, for `items` of a whole call.
    pub fn in_slot(slot: u16, items: Vec<usize>, call: Call) -> Part {
        Part { slot: Some(slot), items, call, ..Part::default() }
    }

    /// `pieces` as one part (a single piece stays itself).
    fn joined(mut pieces: Vec<Part>, fixed_args: usize) -> Part {
        if pieces.len() == 1
            && let Some(piece) = pieces.pop()
        {
            return piece;
        }
        let mut call = Call::default();
        let mut items = Vec::new();
        for (n, piece) in pieces.iter().enumerate() {
            call.keys.extend_from_slice(&piece.call.keys);
            call.args.extend_from_slice(&piece.call.args[if n == 0 { 0 } else { fixed_args }..]);
            items.extend(&piece.items);
        }
        let (slot, with_fixed_keys) = pieces.first().map_or((None, false), |p| (p.slot, p.with_fixed_keys));
        Part { slot, with_fixed_keys, items, call, pieces, fixed_args }
    }

    /// Whether it joins the parts of several slots.
    pub fn is_joined(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// A joined part's pieces, each with the fixed arguments the part holds
    /// now (the cluster client fills some in after the split: `logs`).
    pub fn split(self) -> Vec<Part> {
        let fixed = &self.call.args[..self.fixed_args.min(self.call.args.len())];
        let mut pieces = self.pieces;
        for piece in &mut pieces {
            piece.call.args[..fixed.len()].clone_from_slice(fixed);
        }
        pieces
    }

    /// The arguments of a joined part, sent without keys (Redis refuses a
    /// script whose declared keys span slots): [`NODE_PARTS`], the length of
    /// each run of keys of one slot, the keys, then the arguments (read by
    /// `keys_and_args` in `prelude.lua`, which looks at each run before the
    /// script writes anything).
    pub fn joined_args(&self) -> Vec<Vec<u8>> {
        let mut runs = Vec::new();
        for piece in &self.pieces {
            let mut left = piece.call.keys.len();
            while left > 0 {
                let run = left.min(KEYS_PER_LOOK);
                runs.push(run.to_string());
                left -= run;
            }
        }
        let mut args = Vec::with_capacity(2 + self.call.keys.len() + self.call.args.len());
        args.push(NODE_PARTS.to_vec());
        args.push(runs.join(",").into_bytes());
        args.extend(self.call.keys.iter().map(|key| key.as_bytes().to_vec()));
        args.extend(self.call.args.iter().cloned());
        args
    }
}

/// The reply to one part of a split call.
pub struct PartReply {
    /// The items the part carried, by their index in the whole call.
    pub items: Vec<usize>,
    /// What the script answered.
    pub reply: Reply,
}

/// A call whose keys cannot be split into single-slot parts.
fn spans_slots() -> Error {
    Error::Unavailable("redis: a script's keys span hash slots that cannot be split".into())
}

/// Reads a flat reply front to back (Spin flattens nested replies).
pub struct Reply(std::vec::IntoIter<RedisResult>);

impl Reply {
    /// A reader over `values`.
    pub fn new(values: Vec<RedisResult>) -> Self {
        Reply(values.into_iter())
    }

    /// Whether anything is left.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    /// The next value as text.
    pub fn text(&mut self) -> Result<String, Error> {
        match self.0.next() {
            Some(RedisResult::Binary(bytes)) => String::from_utf8(bytes).map_err(|_| malformed()),
            Some(RedisResult::Status(text)) => Ok(text),
            Some(RedisResult::Int64(n)) => Ok(n.to_string()),
            _ => Err(malformed()),
        }
    }

    /// The next value as a signed number.
    pub fn signed(&mut self) -> Result<i64, Error> {
        match self.0.next() {
            Some(RedisResult::Int64(n)) => Ok(n),
            Some(RedisResult::Binary(bytes)) => {
                std::str::from_utf8(&bytes).ok().and_then(|t| t.parse().ok()).ok_or_else(malformed)
            }
            _ => Err(malformed()),
        }
    }

    /// The next value as a count or seq.
    pub fn number(&mut self) -> Result<u64, Error> {
        u64::try_from(self.signed()?).map_err(|_| malformed())
    }

    /// The next value as a count or seq, or none for ''.
    pub fn optional_number(&mut self) -> Result<Option<u64>, Error> {
        match self.text()?.as_str() {
            "" => Ok(None),
            n => n.parse().map(Some).map_err(|_| malformed()),
        }
    }

    /// The next value as a flag (0 or 1).
    pub fn flag(&mut self) -> Result<bool, Error> {
        match self.number()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed()),
        }
    }

    /// A count, then that many texts.
    pub fn texts(&mut self) -> Result<Vec<String>, Error> {
        let n = self.number()?;
        (0..n).map(|_| self.text()).collect()
    }

    /// Every text left.
    pub fn rest(&mut self) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        while !self.is_empty() {
            out.push(self.text()?);
        }
        Ok(out)
    }
}

/// A script answered something it never sends.
pub fn malformed() -> Error {
    Error::Unavailable("redis: unexpected script reply".into())
}
