//! The `spin:redis/redis@3.0.0` host: outbound Redis for components.
//!
//! Each `connection.open` makes one fresh multiplexed TCP connection, so a
//! connection resource can serve several concurrent requests of a reused
//! instance. Every call counts into [`RedisCounters`].

use crate::bindings::spin::redis::redis::{
    self as wit, Error as RedisError, HostConnectionWithStore, Payload, RedisParameter, RedisResult,
};
use crate::capability::{CapabilityHost, CapabilityView};
use crate::error::HostError;
use crate::outbound::{AllowedHosts, Denied};
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::component::{Accessor, Resource};

/// Cumulative Redis activity of all instances of a host.
#[derive(Debug, Default)]
pub struct RedisCounters {
    opens: AtomicU64,
    commands: AtomicU64,
}

impl RedisCounters {
    /// Counts one `connection.open` call.
    fn count_open(&self) {
        self.opens.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one round trip to Redis.
    fn count_command(&self) {
        self.commands.fetch_add(1, Ordering::Relaxed);
    }

    /// `(opens, commands)` so far.
    pub fn snapshot(&self) -> (u64, u64) {
        (self.opens.load(Ordering::Relaxed), self.commands.load(Ordering::Relaxed))
    }
}

/// What a `connection` resource holds: a handle on one multiplexed connection.
///
/// Dropping the last handle closes the TCP connection.
pub struct RedisConnection {
    conn: MultiplexedConnection,
}

/// Per-store state of the Redis host.
#[derive(Clone)]
pub struct RedisCtx {
    /// The component's resolved `allowed_outbound_hosts`.
    pub allowed_hosts: Arc<AllowedHosts>,
    /// Host-wide counters.
    pub counters: Arc<RedisCounters>,
}

/// [`HasData`](wasmtime::component::HasData) marker for the `spin:redis` host.
pub type RedisHost = CapabilityHost<RedisCtx>;

impl wit::Host for CapabilityView<'_, RedisCtx> {
    fn convert_error(&mut self, error: HostError<RedisError>) -> wasmtime::Result<RedisError> {
        error.into_guest()
    }
}

impl wit::HostConnection for CapabilityView<'_, RedisCtx> {}

/// What a `spin:redis` function returns.
type Reply<T> = Result<T, HostError<RedisError>>;

impl RedisHost {
    /// A clone of the connection behind `connection` plus the counters, or an error for the guest.
    fn connection<T>(
        accessor: &Accessor<T, Self>,
        connection: &Resource<RedisConnection>,
    ) -> Result<(MultiplexedConnection, Arc<RedisCounters>), RedisError> {
        let counters = Self::settings(accessor).counters;
        let conn = Self::read(accessor, connection, |held| held.conn.clone())
            .ok_or_else(|| RedisError::Other("unknown redis connection".to_owned()))?;
        Ok((conn, counters))
    }

    /// Runs `call` against the connection, counting one command.
    async fn run<T, R, F>(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        call: impl FnOnce(MultiplexedConnection) -> F,
    ) -> Reply<R>
    where
        F: Future<Output = Result<R, RedisError>>,
    {
        let (conn, counters) = Self::connection(accessor, &connection)?;
        counters.count_command();
        Ok(call(conn).await?)
    }
}

/// Opens a fresh connection to `address`, after checking it against `allowed_hosts`.
async fn open_connection(address: &str, allowed_hosts: &AllowedHosts) -> Result<RedisConnection, RedisError> {
    allowed_hosts.permit(address, "redis").map_err(|denied| match denied {
        Denied::NotAllowed => RedisError::InvalidAddress,
        Denied::CheckFailed(reason) => RedisError::Other(reason),
    })?;
    let client = redis::Client::open(address).map_err(|_| RedisError::InvalidAddress)?;
    let conn = client.get_multiplexed_async_connection().await.map_err(other)?;
    Ok(RedisConnection { conn })
}

/// Maps a redis client error to `other(<Display text>)`, as Spin does.
fn other(error: redis::RedisError) -> RedisError {
    RedisError::Other(error.to_string())
}

impl<T> HostConnectionWithStore<T> for RedisHost {
    async fn drop(accessor: &Accessor<T, Self>, rep: Resource<RedisConnection>) -> wasmtime::Result<()> {
        Self::delete(accessor, rep)
    }

    async fn open(accessor: &Accessor<T, Self>, address: String) -> Reply<Resource<RedisConnection>> {
        Self::open_resource(accessor, |ctx| async move {
            ctx.counters.count_open();
            open_connection(&address, &ctx.allowed_hosts).await
        })
        .await
    }

    async fn publish(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        channel: String,
        payload: Payload,
    ) -> Reply<()> {
        Self::run(accessor, connection, async move |mut conn| {
            conn.publish::<_, _, ()>(channel, payload).await.map_err(other)
        })
        .await
    }

    async fn get(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        key: String,
    ) -> Reply<Option<Payload>> {
        Self::run(accessor, connection, async move |mut conn| conn.get::<_, Option<Vec<u8>>>(key).await.map_err(other))
            .await
    }

    async fn set(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        key: String,
        value: Payload,
    ) -> Reply<()> {
        Self::run(accessor, connection, async move |mut conn| conn.set::<_, _, ()>(key, value).await.map_err(other))
            .await
    }

    async fn incr(accessor: &Accessor<T, Self>, connection: Resource<RedisConnection>, key: String) -> Reply<i64> {
        Self::run(accessor, connection, async move |mut conn| conn.incr::<_, _, i64>(key, 1).await.map_err(other)).await
    }

    async fn del(accessor: &Accessor<T, Self>, connection: Resource<RedisConnection>, keys: Vec<String>) -> Reply<u32> {
        Self::run(accessor, connection, async move |mut conn| conn.del::<_, u32>(keys).await.map_err(other)).await
    }

    async fn sadd(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        key: String,
        values: Vec<String>,
    ) -> Reply<u32> {
        Self::run(accessor, connection, async move |mut conn| {
            conn.sadd::<_, _, u32>(key, values).await.map_err(type_error_or_other)
        })
        .await
    }

    async fn smembers(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        key: String,
    ) -> Reply<Vec<String>> {
        Self::run(accessor, connection, async move |mut conn| conn.smembers::<_, Vec<String>>(key).await.map_err(other))
            .await
    }

    async fn srem(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        key: String,
        values: Vec<String>,
    ) -> Reply<u32> {
        Self::run(accessor, connection, async move |mut conn| conn.srem::<_, _, u32>(key, values).await.map_err(other))
            .await
    }

    async fn execute(
        accessor: &Accessor<T, Self>,
        connection: Resource<RedisConnection>,
        command: String,
        arguments: Vec<RedisParameter>,
    ) -> Reply<Vec<RedisResult>> {
        Self::run(accessor, connection, async move |mut conn| {
            let reply: Value = build_command(&command, arguments).query_async(&mut conn).await.map_err(other)?;
            flatten_reply(reply).map_err(RedisError::Other)
        })
        .await
    }
}

/// `sadd` reports a wrong-type key as `type-error`, like Spin.
fn type_error_or_other(error: redis::RedisError) -> RedisError {
    if error.kind() == redis::ErrorKind::TypeError { RedisError::TypeError } else { other(error) }
}

/// The redis command for `execute`: int64 arguments as integers, binary as bulk strings.
fn build_command(command: &str, arguments: Vec<RedisParameter>) -> redis::Cmd {
    let mut cmd = redis::cmd(command);
    for argument in arguments {
        match argument {
            RedisParameter::Int64(n) => cmd.arg(n),
            RedisParameter::Binary(bytes) => cmd.arg(bytes),
        };
    }
    cmd
}

/// Flattens a reply depth-first into `execute`'s result list.
///
/// Arrays, sets and maps (key then value) are flattened; an error nested in
/// the reply fails the whole call.
pub fn flatten_reply(reply: Value) -> Result<Vec<RedisResult>, String> {
    let mut out = Vec::new();
    flatten_into(reply, &mut out)?;
    Ok(out)
}

fn flatten_into(value: Value, out: &mut Vec<RedisResult>) -> Result<(), String> {
    match value {
        Value::Nil => out.push(RedisResult::Nil),
        Value::Int(n) => out.push(RedisResult::Int64(n)),
        Value::BulkString(bytes) => out.push(RedisResult::Binary(bytes)),
        Value::SimpleString(status) => out.push(RedisResult::Status(status)),
        Value::Okay => out.push(RedisResult::Status("OK".to_owned())),
        Value::Array(items) | Value::Set(items) => {
            for item in items {
                flatten_into(item, out)?;
            }
        }
        Value::Map(pairs) => {
            for (key, value) in pairs {
                flatten_into(key, out)?;
                flatten_into(value, out)?;
            }
        }
        Value::Attribute { data, .. } => flatten_into(*data, out)?,
        Value::Push { data, .. } => {
            for item in data {
                flatten_into(item, out)?;
            }
        }
        Value::Double(n) => out.push(RedisResult::Binary(n.to_string().into_bytes())),
        Value::Boolean(b) => out.push(RedisResult::Binary(b.to_string().into_bytes())),
        Value::VerbatimString { text, .. } => out.push(RedisResult::Binary(text.into_bytes())),
        Value::BigNumber(n) => out.push(RedisResult::Binary(n.to_string().into_bytes())),
        Value::ServerError(error) => {
            return Err(redis::RedisError::from(error).to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn binary(text: &str) -> RedisResult {
        RedisResult::Binary(text.as_bytes().to_vec())
    }

    fn flat(value: Value) -> Vec<RedisResult> {
        flatten_reply(value).unwrap()
    }

    fn same(a: &[RedisResult], b: &[RedisResult]) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn scalars() {
        assert!(same(&flat(Value::Nil), &[RedisResult::Nil]));
        assert!(same(&flat(Value::Int(-3)), &[RedisResult::Int64(-3)]));
        assert!(same(&flat(bulk("x")), &[binary("x")]));
        assert!(same(&flat(Value::Okay), &[RedisResult::Status("OK".into())]));
        assert!(same(&flat(Value::SimpleString("PONG".into())), &[RedisResult::Status("PONG".into())]));
    }

    #[test]
    fn nested_arrays_flatten_depth_first() {
        let reply = Value::Array(vec![
            bulk("a"),
            Value::Array(vec![Value::Int(1), Value::Array(vec![Value::Nil, bulk("b")])]),
            Value::Int(2),
        ]);
        let expected = [binary("a"), RedisResult::Int64(1), RedisResult::Nil, binary("b"), RedisResult::Int64(2)];
        assert!(same(&flat(reply), &expected));
    }

    #[test]
    fn empty_array_is_empty_list() {
        assert!(flat(Value::Array(vec![])).is_empty());
    }

    #[test]
    fn sets_and_maps_flatten() {
        let reply = Value::Map(vec![(bulk("k1"), Value::Int(1)), (bulk("k2"), Value::Set(vec![bulk("m")]))]);
        let expected = [binary("k1"), RedisResult::Int64(1), binary("k2"), binary("m")];
        assert!(same(&flat(reply), &expected));
    }

    #[test]
    fn other_types_become_their_text() {
        assert!(same(&flat(Value::Double(1.5)), &[binary("1.5")]));
        assert!(same(&flat(Value::Boolean(true)), &[binary("true")]));
        let verbatim = Value::VerbatimString { format: redis::VerbatimFormat::Text, text: "hi".into() };
        assert!(same(&flat(verbatim), &[binary("hi")]));
    }

    #[test]
    fn nested_server_errors_fail_the_call() {
        let reply = redis::parse_redis_value(b"*2\r\n:1\r\n-NOSCRIPT No matching script\r\n").unwrap();
        let text = flatten_reply(reply).unwrap_err();
        assert!(text.contains("NoScript") || text.contains("NOSCRIPT"), "{text}");
    }

    #[test]
    fn resp3_wire_replies_flatten() {
        let reply = redis::parse_redis_value(b"%1\r\n$1\r\nk\r\n~2\r\n:1\r\n_\r\n").unwrap();
        let expected = [binary("k"), RedisResult::Int64(1), RedisResult::Nil];
        assert!(same(&flat(reply), &expected));
    }

    #[test]
    fn noscript_errors_mention_noscript() {
        let error = redis::RedisError::from((
            redis::ErrorKind::NoScriptError,
            "An error was signalled by the server",
            "No matching script. Please use EVAL.".to_owned(),
        ));
        let RedisError::Other(text) = other(error) else { panic!("not other") };
        assert!(text.contains("NoScript") || text.contains("NOSCRIPT"), "{text}");
    }

    #[test]
    fn execute_arguments_keep_their_types() {
        let cmd = build_command("SET", vec![RedisParameter::Binary(b"k".to_vec()), RedisParameter::Int64(42)]);
        let packed = String::from_utf8(cmd.get_packed_command()).unwrap();
        assert_eq!(packed, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n42\r\n");
    }

    #[test]
    fn counters_accumulate() {
        let counters = RedisCounters::default();
        counters.count_open();
        counters.count_command();
        counters.count_command();
        assert_eq!(counters.snapshot(), (1, 2));
    }
}
