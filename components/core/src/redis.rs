//! Redis: one script call per operation on the instance's cached connection,
//! within a deadline: a Redis that stops answering (a hung server, a dropped
//! network) makes the call `unavailable` instead of holding the request.

use std::future::Future;
use std::thread::LocalKey;

use spin_sdk::redis::{Connection, Error as RedisError, RedisParameter, RedisResult};

use crate::Error;
use crate::cached::{Slot, with_connection, within};
use crate::script::{Call, Lua, Reply, Script};
use crate::scripts::ForgetLoaded;
use crate::{dataset, sql};

thread_local! {
    static CONNECTION: Slot<Connection> = const { Slot::new(None) };
    /// The health check's own connection (see [`run_unmarked`]).
    static UNMARKED: Slot<Connection> = const { Slot::new(None) };
}

/// Runs `script`: its keys and arguments as it encodes them, its reply as it
/// decodes it.
pub async fn run<S: Script>(script: &S) -> Result<S::Reply, Error> {
    if !dataset::due() {
        return run_on(&CONNECTION, open, script).await;
    }
    // Beside the call, on the same (pipelined) connection: no added wait.
    let check = dataset::check();
    let (answer, record) = crate::both(run_on(&CONNECTION, open, script), run_on(&CONNECTION, open, &check)).await;
    if let Ok(record) = record {
        dataset::saw(record);
    }
    answer
}

/// Like [`run`], on a connection of its own that does not first apply the
/// SQL store's stale marks: for a script that reads no user's state (the
/// health check), so that a SQL store that hangs is not reported as Redis
/// being down.
pub async fn run_unmarked<S: Script>(script: &S) -> Result<S::Reply, Error> {
    run_on(&UNMARKED, connect, script).await
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
    let params = params(call);
    let lua = S::lua();
    let params = &params;
    let attempt = with_connection(slot, open, |connection| async move { eval(&connection, lua, params).await });
    let values = match within(slot, S::DEADLINE, attempt).await {
        Some(Ok(values)) => values,
        Some(Err(e)) => return Err(unavailable(lua, &e.to_string())),
        None => return Err(unavailable(lua, &format!("no answer within {} ms", S::DEADLINE.as_millis()))),
    };
    script.decode(&mut Reply::new(values))
}

/// Redis could not run the script: logged with the script's name.
fn unavailable(lua: &Lua, reason: &str) -> Error {
    eprintln!("unread: error: redis: {}: {reason}", lua.file);
    Error::Unavailable(format!("redis: {reason}"))
}

/// `EVALSHA sha numkeys keys... args...`: the number of keys, then the keys,
/// then the arguments.
fn params(call: Call) -> Vec<RedisParameter> {
    let mut params = Vec::with_capacity(1 + call.keys.len() + call.args.len());
    params.push(RedisParameter::Int64(call.keys.len() as i64));
    params.extend(call.keys.into_iter().map(|k| RedisParameter::Binary(k.into_bytes())));
    params.extend(call.args.into_iter().map(RedisParameter::Binary));
    params
}

/// `EVALSHA`, then `EVAL` once if Redis does not know the script (after a
/// restart or `SCRIPT FLUSH`); `EVAL` caches it for the next call.
async fn eval(connection: &Connection, lua: &Lua, params: &[RedisParameter]) -> Result<Vec<RedisResult>, RedisError> {
    let with = |head: &str| {
        let mut all = Vec::with_capacity(params.len() + 1);
        all.push(RedisParameter::Binary(head.as_bytes().to_vec()));
        all.extend(params.iter().cloned());
        all
    };
    match connection.execute("EVALSHA", with(&lua.sha1)).await {
        Err(RedisError::Other(text)) if is_no_script(&text) => connection.execute("EVAL", with(&lua.text)).await,
        other => other,
    }
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
        Ok(Some(url)) => forget_stale(&connection, &url).await?,
        Ok(None) => dataset::saw(run_here(&connection, &dataset::check()).await?),
        Err(_) => {}
    }
    Ok(connection)
}

/// Runs `script` on a connection being opened.
async fn run_here<S: Script>(connection: &Connection, script: &S) -> Result<S::Reply, RedisError> {
    let mut call = Call::default();
    script.encode(&mut call);
    let values = eval(connection, S::lua(), &params(call)).await?;
    script.decode(&mut Reply::new(values)).map_err(|e| RedisError::Other(format!("{e:?}")))
}

/// A connection to `redis_url`.
async fn connect() -> Result<Connection, RedisError> {
    let address = spin_sdk::variables::get("redis_url")
        .await
        .map_err(|e| RedisError::Other(format!("variable redis_url: {e:?}")))?;
    Connection::open(&address).await
}

/// Applies the stale marks the SQL store holds, a batch at a time. A SQL
/// store that cannot answer now leaves them for the next connection.
async fn forget_stale(connection: &Connection, url: &str) -> Result<(), RedisError> {
    let Ok(stale) = sql::stale_users(url).await else { return Ok(()) };
    if stale.is_empty() {
        return Ok(());
    }
    let users: Vec<(String, String)> = stale.iter().map(|s| (s.tenant.clone(), s.user.clone())).collect();
    run_here(connection, &ForgetLoaded { users: &users }).await?;
    // Marks written meanwhile stay for the next connection.
    let _ = sql::forget_stale(url, &stale).await;
    Ok(())
}
