//! Redis: one `EVALSHA` per call on the instance's cached connection, within
//! a deadline: a Redis that stops answering (a hung server, a dropped
//! network) makes the call `unavailable` instead of holding the request.

use spin_sdk::redis::{Connection, Error as RedisError, RedisParameter, RedisResult};

use crate::Error;
use crate::cached::{Slot, with_connection, within};
use crate::scripts::Script;

thread_local! {
    static CONNECTION: Slot<Connection> = const { Slot::new(None) };
}

/// Runs `script` with `args` (no KEYS: the scripts derive their keys from the
/// tenant and user they are given, all within one user's hash tag).
pub async fn eval(script: Script, args: Vec<String>) -> Result<Vec<RedisResult>, Error> {
    let args: Vec<RedisParameter> = args.into_iter().map(|a| RedisParameter::Binary(a.into_bytes())).collect();
    let call = with_connection(&CONNECTION, open, |connection| run(connection, script, &args));
    let deadline = script.deadline();
    match within(&CONNECTION, deadline, call).await {
        Some(result) => result.map_err(|e| Error::Unavailable(format!("redis: {e}"))),
        None => Err(Error::Unavailable(format!("redis: no answer within {} ms", deadline.as_millis()))),
    }
}

async fn open() -> Result<Connection, RedisError> {
    let address = spin_sdk::variables::get("redis_url")
        .await
        .map_err(|e| RedisError::Other(format!("variable redis_url: {e}")))?;
    Connection::open(&address).await
}

/// `EVALSHA`, then `EVAL` once if Redis does not know the script (after a
/// restart or `SCRIPT FLUSH`); `EVAL` caches it for the next call.
async fn run(
    connection: std::rc::Rc<Connection>,
    script: Script,
    args: &[RedisParameter],
) -> Result<Vec<RedisResult>, RedisError> {
    let source = script.source();
    let call = |head: &str| {
        let mut params = vec![RedisParameter::Binary(head.as_bytes().to_vec()), RedisParameter::Int64(0)];
        params.extend(args.iter().cloned());
        params
    };
    match connection.execute("EVALSHA", call(&source.sha1)).await {
        Err(RedisError::Other(text)) if is_no_script(&text) => connection.execute("EVAL", call(source.text)).await,
        other => other,
    }
}

fn is_no_script(text: &str) -> bool {
    text.contains("NoScript") || text.contains("NOSCRIPT")
}
