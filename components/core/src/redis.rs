//! One Redis connection per instance, one `EVALSHA` per call.
//!
//! Opening a connection is a new TCP connection and costs most of a request,
//! so the connection is cached in the instance (Spin reuses an instance for
//! many requests). It holds no per-user data. A cached connection that broke
//! is replaced once; every script is idempotent, so the retry is safe.

use std::cell::RefCell;
use std::rc::Rc;

use spin_sdk::redis::{Connection, Error as RedisError, RedisParameter, RedisResult};

use crate::Error;
use crate::scripts::Script;

thread_local! {
    static CACHED: RefCell<Option<Rc<Connection>>> = const { RefCell::new(None) };
}

/// Runs `script` with `args` (no KEYS: the scripts derive their keys from the
/// tenant and user they are given).
pub async fn eval(script: Script, args: Vec<String>) -> Result<Vec<RedisResult>, Error> {
    let args: Vec<RedisParameter> = args.into_iter().map(|a| RedisParameter::Binary(a.into_bytes())).collect();
    let (connection, cached) = connection().await?;
    match run(&connection, script, &args).await {
        Err(_) if cached => {
            forget(&connection);
            let (fresh, _) = connection_opened().await?;
            run(&fresh, script, &args).await.map_err(|e| unavailable(&e))
        }
        Err(e) => {
            forget(&connection);
            Err(unavailable(&e))
        }
        Ok(reply) => Ok(reply),
    }
}

/// `EVALSHA`, then `EVAL` once if Redis does not know the script (after a
/// restart or `SCRIPT FLUSH`); `EVAL` caches it for the next call.
async fn run(connection: &Connection, script: Script, args: &[RedisParameter]) -> Result<Vec<RedisResult>, RedisError> {
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

async fn connection() -> Result<(Rc<Connection>, bool), Error> {
    match CACHED.with_borrow(|c| c.clone()) {
        Some(connection) => Ok((connection, true)),
        None => connection_opened().await,
    }
}

async fn connection_opened() -> Result<(Rc<Connection>, bool), Error> {
    let address = spin_sdk::variables::get("redis_url")
        .await
        .map_err(|e| Error::Unavailable(format!("variable redis_url: {e}")))?;
    let connection = Rc::new(Connection::open(&address).await.map_err(|e| unavailable(&e))?);
    CACHED.with_borrow_mut(|c| *c = Some(connection.clone()));
    Ok((connection, false))
}

/// Drops the cached connection if it is still the one that failed.
fn forget(failed: &Rc<Connection>) {
    CACHED.with_borrow_mut(|c| {
        if c.as_ref().is_some_and(|current| Rc::ptr_eq(current, failed)) {
            *c = None;
        }
    });
}

fn unavailable(error: &RedisError) -> Error {
    Error::Unavailable(format!("redis: {error}"))
}
