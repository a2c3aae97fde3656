//! Redis: one script call per operation on the instance's cached connection,
//! within a deadline: a Redis that stops answering (a hung server, a dropped
//! network) makes the call `unavailable` instead of holding the request.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::thread::LocalKey;
use std::time::{Duration, Instant};

use spin_sdk::redis::{Connection, Error as RedisError, RedisParameter, RedisResult};

use crate::Error;
use crate::cached::{Slot, with_connection, within};
use crate::script::{Call, Lua, Reply, Script};
use crate::scripts::{ForgetLoaded, Ping, WalkUsers};
use crate::{cluster, dataset, sql};

thread_local! {
    /// Whether Redis is a cluster; unknown until first read.
    static CLUSTER: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    static CONNECTION: Slot<Connection> = const { Slot::new(None) };
    /// The health check's own connection (see [`ping`]).
    static UNMARKED: Slot<Connection> = const { Slot::new(None) };
}

/// Runs `script`: its keys and arguments as it encodes them, its reply as it
/// decodes it.
pub async fn run<S: Script>(script: &S) -> Result<S::Reply, Error> {
    let cluster = is_cluster().await?;
    if cluster && cluster::unopened() {
        open_cluster().await?;
    }
    if !dataset::due() {
        return send(cluster, script).await;
    }
    // Beside the call, on the same (pipelined) connections: no added wait.
    let check = dataset::check();
    let (answer, record) = crate::both(send(cluster, script), send(cluster, &check)).await;
    if let Ok(record) = record {
        dataset::saw(record);
    }
    answer
}

/// Sends `script` on the instance's connection, or to the cluster.
async fn send<S: Script>(cluster: bool, script: &S) -> Result<S::Reply, Error> {
    if cluster { cluster::run(script).await } else { run_on(&CONNECTION, open, script).await }
}

/// The health check's round trip: a script that touches no key, on a
/// connection of its own that does not first apply the SQL store's stale
/// marks (a SQL store that hangs is not Redis being down). On a cluster,
/// on every primary, with every slot served ([`cluster::ping_every_primary`]).
pub async fn ping() -> Result<(), Error> {
    if is_cluster().await? {
        return cluster::ping_every_primary().await;
    }
    run_on(&UNMARKED, connect, &Ping).await
}

/// Whether Redis is a cluster (`redis_cluster`), read once per instance.
pub async fn is_cluster() -> Result<bool, Error> {
    if let Some(known) = CLUSTER.get() {
        return Ok(known);
    }
    let cluster = match crate::config::text("redis_cluster").await?.as_deref().map(str::trim) {
        None | Some("" | "false") => false,
        Some("true") => true,
        Some(other) => {
            let message = format!("variable redis_cluster must be true or false, not {other:?}");
            eprintln!("unread: error: {message}");
            return Err(Error::Unavailable(message));
        }
    };
    CLUSTER.set(Some(cluster));
    Ok(cluster)
}

/// On Redis Cluster, an instance that has no slot map yet (or lost it to a
/// failure) reads one, then does what [`open`] does for a new connection.
async fn open_cluster() -> Result<(), Error> {
    let opening = cluster::opening();
    cluster::map().await?;
    match sql::configured().await {
        Ok(Some(url)) => forget_stale(&url, async |forget| cluster::run(forget).await.map(drop)).await?,
        Ok(None) => dataset::saw(cluster::run(&dataset::check()).await?),
        Err(_) => {}
    }
    cluster::opened(opening);
    Ok(())
}

/// The users of `tenant` that have state in Redis, a batch after `cursor`
/// ('0': from the start); the next cursor, '0' when the walk is done. On
/// one Redis the cursor is `<SCAN cursor>.<run id>`: a SCAN cursor means
/// nothing to a server restarted or promoted since, so there the walk
/// starts over (repeating users harmlessly, passing over none). A bare
/// SCAN cursor (an earlier build's) starts over too. On Redis Cluster the
/// walk goes through every primary in turn (the cursor is
/// `<primary>.<SCAN cursor>.<layout>`, see [`walk_primaries`]).
pub async fn walk_users(tenant: &str, cursor: &str, wanted: u32) -> Result<(String, Vec<String>), Error> {
    if is_cluster().await? {
        return walk_primaries(tenant, cursor, wanted).await;
    }
    let (scan, server) = match cursor.split_once('.') {
        Some((scan, server)) if digits(scan) && server.len() <= 16 && server.bytes().all(|b| b.is_ascii_hexdigit()) => {
            (scan, server)
        }
        None if digits(cursor) => ("0", ""),
        _ => return Err(not_issued()),
    };
    let (next, server, users) = run(&WalkUsers { tenant, cursor: scan, server, wanted }).await?;
    Ok((if next == "0" { next } else { format!("{next}.{server}") }, users))
}

fn not_issued() -> Error {
    Error::Invalid("cursor is not one this service issued".into())
}

fn digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// [`walk_users`] on Redis Cluster: every primary in turn (sorted by
/// address), each by SCAN. A key moves only with its slot, and a SCAN
/// cursor means something only on its node, so the walk holds to one
/// layout of the cluster (which primary serves which slots): each call
/// checks it is settled before and after its pages (503 while a slot is
/// moving), and a layout other than the one the cursor carries starts the
/// walk again from the first primary (walks repeat harmlessly; what they
/// must not do is pass over a user). A cursor of an earlier form starts
/// again too.
async fn walk_primaries(tenant: &str, cursor: &str, wanted: u32) -> Result<(String, Vec<String>), Error> {
    let moving = || Error::Unavailable("redis: cluster slots are moving; a walk waits for them".into());
    let mut parts = cursor.split('.');
    let (primary, scan, layout) = (parts.next(), parts.next(), parts.next());
    let start = cursor == "0";
    if parts.next().is_some() || !primary.is_some_and(digits) || !(start || scan.is_some_and(digits)) {
        return Err(not_issued());
    }
    let carried = match layout {
        Some(hex) => Some(u64::from_str_radix(hex, 16).map_err(|_| not_issued())?),
        None => None,
    };
    let layout = cluster::settled_layout().await?.ok_or_else(moving)?;
    let (mut primary, mut scan) = match (primary, scan) {
        (Some(primary), Some(scan)) if carried == Some(layout) => {
            (primary.parse::<usize>().map_err(|_| not_issued())?, scan.to_string())
        }
        _ => (0, "0".to_string()),
    };
    let mut users = Vec::new();
    // A primary walked to its end goes on to the next one in the same call,
    // so that a small tenant is walked in one call, as on one Redis.
    let done = loop {
        // The layout names every primary's run id: no check per script.
        let batch = wanted.saturating_sub(users.len() as u32).max(1);
        let walk = WalkUsers { tenant, cursor: &scan, server: "", wanted: batch };
        let ((next, _, found), primaries) = cluster::run_on_primary(&walk, primary).await?;
        users.extend(found);
        match (next.as_str(), primary + 1 < primaries) {
            ("0", false) => break true,
            ("0", true) => (primary, scan) = (primary + 1, "0".to_string()),
            (more, _) => scan = more.to_string(),
        }
        if users.len() >= wanted as usize {
            break false;
        }
    };
    // The pages hold only if no key moved while they were read.
    let after = cluster::settled_layout().await?.ok_or_else(moving)?;
    Ok(match (after == layout, done) {
        (true, true) => ("0".to_string(), users),
        (true, false) => (format!("{primary}.{scan}.{layout:x}"), users),
        (false, _) => (format!("0.0.{after:x}"), users),
    })
}

async fn run_on<S, Open, OpenFut>(
    slot: &'static LocalKey<Slot<Connection>>,
    open: Open,
    script: &S,
) -> Result<S::Reply, Error>
where
    S: Script,
    Open: Fn() -> OpenFut,
    OpenFut: Future<Output = Result<Connection, RedisError>>,
{
    let mut call = Call::default();
    script.encode(&mut call);
    let params = params(&call.keys, &call.args);
    let lua = S::lua();
    let params = &params;
    let replicas = replicas_for::<S>().await?;
    let attempt = with_connection(slot, open, |connection| async move {
        let values = eval(&connection, lua, params, false).await?;
        // Replicas that fall short are no broken connection: not sent again
        // on another one.
        Ok((values, wait_for_replicas(&connection, "", replicas).await))
    });
    let values = match within(slot, S::DEADLINE, attempt).await {
        Some(Ok((values, Ok(())))) => values,
        Some(Ok((_, Err(e))) | Err(e)) => return Err(unavailable(lua.file, &e.to_string())),
        None => return Err(unavailable(lua.file, &format!("no answer within {} ms", S::DEADLINE.as_millis()))),
    };
    script.decode(&mut Reply::new(values))
}

/// Redis could not run the script (or command) `what`: logged with its name.
pub(crate) fn unavailable(what: &str, reason: &str) -> Error {
    eprintln!("unread: error: redis: {what}: {reason}");
    Error::Unavailable(format!("redis: {reason}"))
}

/// `EVALSHA sha numkeys keys... args...`: the number of keys, then the keys,
/// then the arguments.
pub(crate) fn params(keys: &[String], args: &[Vec<u8>]) -> Vec<RedisParameter> {
    let mut params = Vec::with_capacity(1 + keys.len() + args.len());
    params.push(RedisParameter::Int64(keys.len() as i64));
    params.extend(keys.iter().map(|k| RedisParameter::Binary(k.as_bytes().to_vec())));
    params.extend(args.iter().cloned().map(RedisParameter::Binary));
    params
}

/// `EVALSHA`, then `EVAL` once if Redis does not know the script (after a
/// restart or `SCRIPT FLUSH`); `EVAL` caches it for the next call. With
/// `asking` (Redis Cluster's `ASK`), each is preceded by `ASKING`, which
/// holds for the next command only.
pub(crate) async fn eval(
    connection: &Connection,
    lua: &Lua,
    params: &[RedisParameter],
    asking: bool,
) -> Result<Vec<RedisResult>, RedisError> {
    let send = async |command: &str, head: &str| {
        if asking {
            connection.execute("ASKING", Vec::new()).await?;
        }
        let mut all = Vec::with_capacity(params.len() + 1);
        all.push(RedisParameter::Binary(head.as_bytes().to_vec()));
        all.extend(params.iter().cloned());
        connection.execute(command, all).await
    };
    match send("EVALSHA", &lua.sha1).await {
        Err(RedisError::Other(text)) if is_no_script(&text) => send("EVAL", &lua.text).await,
        other => other,
    }
}

/// How long a write waits for its replicas (`WAIT`'s timeout) before its
/// call answers unavailable. The wait holds the instance's connection (Redis
/// answers nothing else on it meanwhile), so it is short: replicas that keep
/// up acknowledge within a round trip.
const REPLICA_WAIT_MS: i64 = 100;

/// How long an instance trusts what it read of a node's online replicas.
const REPLICAS_SEEN_FOR: Duration = Duration::from_secs(1);

thread_local! {
    /// Per node (`""`: the one Redis), how many replicas were online and
    /// when that was read (`INFO replication`).
    static ONLINE_REPLICAS: RefCell<HashMap<String, (u32, Instant)>> = RefCell::new(HashMap::new());
}

/// How many replicas a call of `S` waits for: `redis_wait_replicas` if it
/// writes what its caller acknowledges ([`Script::WAITS_FOR_REPLICAS`]).
pub(crate) async fn replicas_for<S: Script>() -> Result<u32, Error> {
    if S::WAITS_FOR_REPLICAS { crate::config::wait_replicas().await } else { Ok(0) }
}

/// `WAIT`, after a script on `connection` to `node`: until `replicas`
/// replicas hold every write sent on it so far (the script's among them),
/// or as many as the node has online, if fewer (a failover then has no
/// replica to promote without the write; a node whose replica failed keeps
/// taking writes); an error that says how many did within
/// [`REPLICA_WAIT_MS`]. Nothing for 0.
pub(crate) async fn wait_for_replicas(connection: &Connection, node: &str, replicas: u32) -> Result<(), RedisError> {
    if replicas == 0 {
        return Ok(());
    }
    let wanted = replicas.min(online_replicas(connection, node).await?);
    if wanted == 0 {
        return Ok(());
    }
    let wait = vec![RedisParameter::Int64(wanted.into()), RedisParameter::Int64(REPLICA_WAIT_MS)];
    match connection.execute("WAIT", wait).await?.as_slice() {
        [RedisResult::Int64(held)] if *held >= i64::from(wanted) => Ok(()),
        [RedisResult::Int64(held)] => {
            // Read afresh next time: a replica that failed no longer counts.
            ONLINE_REPLICAS.with_borrow_mut(|known| known.remove(node));
            Err(RedisError::Other(format!(
                "WAIT: {held} of {wanted} replicas acknowledged the write within {REPLICA_WAIT_MS} ms"
            )))
        }
        _ => Err(RedisError::Other("WAIT: unexpected reply".into())),
    }
}

/// The replicas online on `node` (`state=online` in `INFO replication`), as
/// read at most [`REPLICAS_SEEN_FOR`] ago.
async fn online_replicas(connection: &Connection, node: &str) -> Result<u32, RedisError> {
    let seen = ONLINE_REPLICAS.with_borrow(|known| known.get(node).copied());
    if let Some((online, _)) = seen.filter(|(_, at)| at.elapsed() < REPLICAS_SEEN_FOR) {
        return Ok(online);
    }
    let info = match connection.execute("INFO", vec![RedisParameter::Binary(b"replication".to_vec())]).await?.as_slice()
    {
        [RedisResult::Binary(text)] => String::from_utf8_lossy(text).into_owned(),
        [RedisResult::Status(text)] => text.clone(),
        _ => return Err(RedisError::Other("INFO replication: unexpected reply".into())),
    };
    let online = info.lines().filter(|line| line.starts_with("slave") && line.contains("state=online")).count();
    let online = u32::try_from(online).unwrap_or(u32::MAX);
    ONLINE_REPLICAS.with_borrow_mut(|known| known.insert(node.to_string(), (online, Instant::now())));
    Ok(online)
}

fn is_no_script(text: &str) -> bool {
    text.contains("NoScript") || text.contains("NOSCRIPT")
}

/// Opens the instance's connection. With a SQL store, it first hands Redis
/// the users whose writes reached only SQL while Redis was unreachable (see
/// [`sql::stale_users`]), so that their next read rebuilds from the truth;
/// cache-only, it checks that Redis still holds the data set this instance
/// saw (see [`dataset`]).
async fn open() -> Result<Connection, RedisError> {
    let connection = connect().await?;
    match sql::configured().await {
        Ok(Some(url)) => forget_stale(&url, async |forget| run_here(&connection, forget).await.map(drop)).await?,
        Ok(None) => dataset::saw(run_here(&connection, &dataset::check()).await?),
        Err(_) => {}
    }
    Ok(connection)
}

/// Runs `script` on a connection being opened.
async fn run_here<S: Script>(connection: &Connection, script: &S) -> Result<S::Reply, RedisError> {
    let mut call = Call::default();
    script.encode(&mut call);
    let values = eval(connection, S::lua(), &params(&call.keys, &call.args), false).await?;
    let replicas = replicas_for::<S>().await.map_err(|e| RedisError::Other(format!("{e:?}")))?;
    wait_for_replicas(connection, "", replicas).await?;
    script.decode(&mut Reply::new(values)).map_err(|e| RedisError::Other(format!("{e:?}")))
}

/// A connection to `redis_url`.
async fn connect() -> Result<Connection, RedisError> {
    let address = spin_sdk::variables::get("redis_url")
        .await
        .map_err(|e| RedisError::Other(format!("variable redis_url: {e:?}")))?;
    Connection::open(&address).await
}

/// Applies every stale mark the SQL store holds, a batch at a time, with
/// `forget` (on the connection being opened, or on the cluster): a user
/// left out would be answered from what Redis held before its writes. A
/// SQL store that cannot answer now leaves them for the next connection.
async fn forget_stale<E>(url: &str, forget: impl AsyncFn(&ForgetLoaded<'_>) -> Result<(), E>) -> Result<(), E> {
    let mut last_batch = Vec::new();
    loop {
        let Ok(stale) = sql::stale_users(url).await else { return Ok(()) };
        // The same batch again: its marks could not be removed.
        if stale.is_empty() || stale == last_batch {
            return Ok(());
        }
        let users: Vec<(String, String)> = stale.iter().map(|s| (s.tenant.clone(), s.user.clone())).collect();
        forget(&ForgetLoaded { users: &users }).await?;
        // Marks renewed meanwhile stay (and come in a later batch).
        if sql::forget_stale(url, &stale).await.is_err() || stale.len() < sql::STALE_BATCH {
            return Ok(());
        }
        last_batch = stale;
    }
}
