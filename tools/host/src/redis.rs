//! The `spin:redis/redis@3.0.0` host: outbound Redis for components.
//!
//! Follows Spin 4.1's `crates/factor-outbound-redis` (`host.rs`, `lib.rs`),
//! with the same client (redis-rs 0.32 with its `tokio-native-tls-comp`
//! feature, as Spin builds it):
//!
//! - Each `connection.open` makes one fresh multiplexed connection, so a
//!   connection resource can serve several concurrent requests of a reused
//!   instance. `rediss://` connects over TLS (native-tls: OpenSSL here, with
//!   the system's trusted roots; `#insecure` at the end of the URL skips the
//!   certificate checks); a URL's user, password, database and
//!   `?protocol=resp3` are redis-rs's to read.
//! - One instance holds at most 1024 connections at once (Spin keeps them in
//!   a table of that capacity per instance,
//!   [`INSTANCE_TABLE_CAPACITY`](crate::capability::INSTANCE_TABLE_CAPACITY));
//!   the next `open` connects, then fails with `too-many-connections`.
//! - `execute` converts replies as Spin does ([`RedisResults`]): maps,
//!   attributes, push replies and verbatim strings are refused.
//! - `get` and `execute` refuse a reply bigger than [`MAX_RESULT_BYTES`]
//!   (counted as Spin counts it) with `other`.
//!
//! Every call counts into [`RedisCounters`].

use crate::bindings::spin::redis::redis::{
    self as wit, Error as RedisError, HostConnectionWithStore, Payload, RedisParameter, RedisResult,
};
use crate::capability::{CapabilityHost, CapabilityView, InstanceTable, TableSlot};
use crate::error::HostError;
use crate::outbound::{AllowedHosts, Denied};
use crate::sql::{MAX_RESULT_BYTES, too_large_message};
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, FromRedisValue, Value};
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

/// What a `connection` resource holds: a handle on one multiplexed connection
/// and its place among the instance's connections.
///
/// Dropping the last handle closes the TCP connection.
pub struct RedisConnection {
    conn: MultiplexedConnection,
    _slot: TableSlot,
}

/// The Redis host's settings and state for one store (one instance).
#[derive(Clone)]
pub struct RedisCtx {
    /// The component's resolved `allowed_outbound_hosts`.
    pub allowed_hosts: Arc<AllowedHosts>,
    /// Host-wide counters.
    pub counters: Arc<RedisCounters>,
    /// The connections this instance holds.
    connections: InstanceTable,
}

impl RedisCtx {
    /// The component's settings; [`RedisCtx::for_instance`] makes each store's copy.
    pub fn new(allowed_hosts: Arc<AllowedHosts>, counters: Arc<RedisCounters>) -> RedisCtx {
        RedisCtx { allowed_hosts, counters, connections: InstanceTable::default() }
    }

    /// The same settings with a count of connections of its own, for a new instance.
    pub fn for_instance(&self) -> RedisCtx {
        RedisCtx { connections: InstanceTable::default(), ..self.clone() }
    }
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
            .ok_or_else(|| RedisError::Other("could not find connection for resource".to_owned()))?;
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

/// Opens a fresh connection to `address` for the instance of `ctx`, in Spin's
/// order: the permission check, the URL, the connection, then the instance's
/// place for it (so a connection over the cap is made, then dropped).
async fn open_connection(address: &str, ctx: &RedisCtx) -> Result<RedisConnection, RedisError> {
    ctx.allowed_hosts.permit(address, "redis").map_err(|denied| match denied {
        Denied::NotAllowed => RedisError::InvalidAddress,
        Denied::CheckFailed(reason) => RedisError::Other(reason),
    })?;
    let client = redis::Client::open(address).map_err(|_| RedisError::InvalidAddress)?;
    let conn = client.get_multiplexed_async_connection().await.map_err(other)?;
    let slot = ctx.connections.reserve().ok_or(RedisError::TooManyConnections)?;
    Ok(RedisConnection { conn, _slot: slot })
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
            open_connection(&address, &ctx).await
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
        Self::run(accessor, connection, async move |mut conn| {
            let value = conn.get::<_, Option<Vec<u8>>>(key).await.map_err(other)?;
            let size = std::mem::size_of::<Option<Vec<u8>>>() + value.as_ref().map_or(0, Vec::len);
            if size > MAX_RESULT_BYTES { Err(RedisError::Other(too_large_message())) } else { Ok(value) }
        })
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
            let RedisResults(results) =
                build_command(&command, arguments).query_async(&mut conn).await.map_err(other)?;
            let size = std::mem::size_of::<Vec<RedisResult>>() + results.iter().map(memory_size).sum::<usize>();
            if size > MAX_RESULT_BYTES { Err(RedisError::Other(too_large_message())) } else { Ok(results) }
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

/// `execute`'s result list, converted from a reply as Spin 4.1 converts it
/// (its `RedisResults`).
///
/// Arrays and sets are flattened depth-first; a double and a big number
/// become their text, a boolean the integer 1 or 0. A map, an attribute, a
/// push reply and a verbatim string fail the call with `other` naming the
/// type. An error nested in the reply fails the call with the text of that
/// error: redis-rs takes nested errors out before the conversion runs.
pub struct RedisResults(pub Vec<RedisResult>);

impl FromRedisValue for RedisResults {
    fn from_redis_value(value: &Value) -> redis::RedisResult<RedisResults> {
        let mut results = Vec::new();
        append(&mut results, value)?;
        Ok(RedisResults(results))
    }
}

/// The error Spin gives for a reply type it does not convert.
fn unsupported(what: &str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::TypeError, "Could not convert Redis response", what.to_owned()))
}

fn append(results: &mut Vec<RedisResult>, value: &Value) -> redis::RedisResult<()> {
    match value {
        Value::Nil => results.push(RedisResult::Nil),
        Value::Int(n) => results.push(RedisResult::Int64(*n)),
        Value::BulkString(bytes) => results.push(RedisResult::Binary(bytes.clone())),
        Value::SimpleString(status) => results.push(RedisResult::Status(status.clone())),
        Value::Okay => results.push(RedisResult::Status("OK".to_owned())),
        Value::Map(_) => return Err(unsupported("Redis Map type is not supported")),
        Value::Attribute { .. } => return Err(unsupported("Redis Attribute type is not supported")),
        Value::Array(items) | Value::Set(items) => {
            for item in items {
                append(results, item)?;
            }
        }
        Value::Double(n) => results.push(RedisResult::Binary(n.to_string().into_bytes())),
        Value::VerbatimString { .. } => {
            return Err(unsupported("Redis string with format attribute is not supported"));
        }
        Value::Boolean(b) => results.push(RedisResult::Int64(i64::from(*b))),
        Value::BigNumber(n) => results.push(RedisResult::Binary(n.to_string().into_bytes())),
        Value::Push { .. } => return Err(unsupported("Redis Pub/Sub types are not supported")),
        // Unreached through `query_async`, which fails on a nested error
        // first; kept as Spin words it.
        Value::ServerError(error) => {
            return Err(redis::RedisError::from((
                redis::ErrorKind::ResponseError,
                "Server error",
                format!("{error:?}"),
            )));
        }
    }
    Ok(())
}

/// What one result counts towards [`MAX_RESULT_BYTES`], as Spin counts it.
fn memory_size(value: &RedisResult) -> usize {
    let payload = match value {
        RedisResult::Nil | RedisResult::Int64(_) => 0,
        RedisResult::Binary(bytes) => bytes.len(),
        RedisResult::Status(text) => text.len(),
    };
    std::mem::size_of::<RedisResult>() + payload
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::INSTANCE_TABLE_CAPACITY;
    use crate::test_tls::SelfSigned;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn binary(text: &str) -> RedisResult {
        RedisResult::Binary(text.as_bytes().to_vec())
    }

    /// `reply` converted as `execute` converts it: `query_async` takes nested
    /// errors out first, then [`RedisResults`] converts; an error is the text
    /// the guest gets in `other`.
    fn convert(reply: Value) -> Result<Vec<RedisResult>, String> {
        reply
            .extract_error()
            .and_then(redis::from_owned_redis_value::<RedisResults>)
            .map(|RedisResults(results)| results)
            .map_err(|error| error.to_string())
    }

    fn wire(bytes: &[u8]) -> Value {
        redis::parse_redis_value(bytes).unwrap()
    }

    fn same(a: &[RedisResult], b: &[RedisResult]) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    fn converts_to(reply: Value, expected: &[RedisResult]) {
        let results = convert(reply).unwrap();
        assert!(same(&results, expected), "{results:?} is not {expected:?}");
    }

    #[test]
    fn scalars() {
        converts_to(Value::Nil, &[RedisResult::Nil]);
        converts_to(Value::Int(-3), &[RedisResult::Int64(-3)]);
        converts_to(bulk("x"), &[binary("x")]);
        converts_to(Value::Okay, &[RedisResult::Status("OK".into())]);
        converts_to(Value::SimpleString("PONG".into()), &[RedisResult::Status("PONG".into())]);
    }

    #[test]
    fn nested_arrays_and_sets_flatten_depth_first() {
        let reply = Value::Array(vec![
            bulk("a"),
            Value::Array(vec![Value::Int(1), Value::Set(vec![Value::Nil, bulk("b")])]),
            Value::Int(2),
        ]);
        let expected = [binary("a"), RedisResult::Int64(1), RedisResult::Nil, binary("b"), RedisResult::Int64(2)];
        converts_to(reply, &expected);
        converts_to(Value::Array(vec![]), &[]);
        converts_to(wire(b"~2\r\n:1\r\n_\r\n"), &[RedisResult::Int64(1), RedisResult::Nil]);
    }

    #[test]
    fn resp3_scalars_convert_as_in_spin() {
        converts_to(wire(b",1.5\r\n"), &[binary("1.5")]);
        converts_to(wire(b"#t\r\n"), &[RedisResult::Int64(1)]);
        converts_to(wire(b"#f\r\n"), &[RedisResult::Int64(0)]);
        let big = "3492890328409238509324850943850943825024385";
        converts_to(wire(format!("({big}\r\n").as_bytes()), &[binary(big)]);
    }

    #[test]
    fn maps_attributes_push_replies_and_verbatim_strings_are_refused() {
        let refusal = |reply: Value| convert(reply).unwrap_err();
        assert_eq!(
            refusal(wire(b"%1\r\n$1\r\nk\r\n:1\r\n")),
            "Could not convert Redis response - TypeError: Redis Map type is not supported"
        );
        assert_eq!(
            refusal(wire(b"=15\r\ntxt:Some string\r\n")),
            "Could not convert Redis response - TypeError: Redis string with format attribute is not supported"
        );
        assert_eq!(
            refusal(Value::Attribute { data: Box::new(Value::Int(1)), attributes: vec![] }),
            "Could not convert Redis response - TypeError: Redis Attribute type is not supported"
        );
        assert_eq!(
            refusal(Value::Push { kind: redis::PushKind::Message, data: vec![] }),
            "Could not convert Redis response - TypeError: Redis Pub/Sub types are not supported"
        );
        // Inside an array too: the whole call fails.
        assert!(refusal(Value::Array(vec![Value::Int(1), wire(b"%0\r\n")])).contains("Map type"));
    }

    #[test]
    fn nested_server_errors_fail_the_call_with_their_text() {
        let error = wire(b"-NOSCRIPT No matching script\r\n");
        let Value::ServerError(server_error) = error.clone() else { panic!("not a server error") };
        let text = redis::RedisError::from(server_error).to_string();
        assert!(text.contains("NoScript") || text.contains("NOSCRIPT"), "{text}");
        assert_eq!(convert(Value::Array(vec![Value::Int(1), error.clone()])).unwrap_err(), text);
        // Taken out before the conversion, so a map holding one fails with the error's text.
        assert_eq!(convert(Value::Map(vec![(bulk("k"), error)])).unwrap_err(), text);
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
    fn results_are_sized_as_in_spin() {
        let each = std::mem::size_of::<RedisResult>();
        assert_eq!(memory_size(&RedisResult::Nil), each);
        assert_eq!(memory_size(&RedisResult::Int64(7)), each);
        assert_eq!(memory_size(&binary("abc")), each + 3);
        assert_eq!(memory_size(&RedisResult::Status("OK".into())), each + 2);
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

    #[test]
    fn an_instance_holds_at_most_1024_connections() {
        let ctx = RedisCtx::new(Arc::default(), Arc::default()).for_instance();
        let mut held: Vec<_> = (0..INSTANCE_TABLE_CAPACITY).map(|_| ctx.connections.reserve().unwrap()).collect();
        assert!(ctx.connections.reserve().is_none(), "the 1025th");
        let other_instance = ctx.for_instance();
        assert!(other_instance.connections.reserve().is_some(), "the cap is per instance");
        held.pop();
        assert!(ctx.connections.reserve().is_some(), "a place is free again after a drop");
        drop(held);
        assert_eq!(ctx.connections.held(), 0);
    }

    #[test]
    fn urls_carry_user_password_database_and_tls() {
        let info =
            redis::Client::open("redis://alice:p%40ss@db.example.com:6380/3").unwrap().get_connection_info().clone();
        assert!(
            matches!(&info.addr, redis::ConnectionAddr::Tcp(host, 6380) if host == "db.example.com"),
            "{:?}",
            info.addr
        );
        assert_eq!(info.redis.db, 3);
        assert_eq!(info.redis.username.as_deref(), Some("alice"));
        assert_eq!(info.redis.password.as_deref(), Some("p@ss"));
        let info = redis::Client::open("redis://:secret@127.0.0.1").unwrap().get_connection_info().clone();
        assert_eq!((info.redis.username, info.redis.password.as_deref()), (None, Some("secret")));
        let tls = redis::Client::open("rediss://cache.example.com:6380").unwrap().get_connection_info().clone();
        assert!(
            matches!(&tls.addr, redis::ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "cache.example.com"),
            "{:?}",
            tls.addr
        );
        // redis-rs's default port is 6379 for `rediss` too.
        let tls = redis::Client::open("rediss://cache.example.com/#insecure").unwrap().get_connection_info().clone();
        assert!(
            matches!(&tls.addr, redis::ConnectionAddr::TcpTls { port: 6379, insecure: true, .. }),
            "{:?}",
            tls.addr
        );
    }

    /// A redis-server of the test's own: plain on `port`, TLS on `tls_port`
    /// with a self-signed certificate for 127.0.0.1 that `openssl` makes, and
    /// an ACL user `alice` (password `wonderland`); killed on drop.
    struct TestRedis {
        child: Child,
        _certificate: SelfSigned,
        port: u16,
        tls_port: u16,
    }

    impl TestRedis {
        /// The server, or `None` (the test is skipped) without `openssl` or `redis-server`.
        fn start(name: &str) -> Option<TestRedis> {
            let certificate = SelfSigned::make(name, "IP:127.0.0.1")?;
            let free_port = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let (port, tls_port) = (free_port(), free_port());
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--tls-port", &tls_port.to_string(), "--tls-cert-file", "cert.pem", "--tls-key-file", "key.pem"])
                .args(["--tls-auth-clients", "no", "--user", "alice", "on", ">wonderland", "~*", "&*", "+@all"])
                .current_dir(certificate.dir())
                .stdout(Stdio::null())
                .spawn();
            let Ok(child) = child else {
                eprintln!("skipping: no redis-server");
                return None;
            };
            let server = TestRedis { child, _certificate: certificate, port, tls_port };
            for _ in 0..500 {
                let ready = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                    .and_then(|client| client.get_connection())
                    .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
                if ready.is_ok() {
                    return Some(server);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("redis-server did not start on port {port}");
        }

        /// Settings of a component allowed `entries`.
        fn ctx(entries: &[&str]) -> RedisCtx {
            RedisCtx::new(Arc::new(AllowedHosts::parse("c", entries).unwrap()), Arc::default()).for_instance()
        }
    }

    impl Drop for TestRedis {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    async fn set_then_get(connection: &RedisConnection, key: &str) -> Option<Vec<u8>> {
        let mut conn = connection.conn.clone();
        conn.set::<_, _, ()>(key, b"v".as_slice()).await.unwrap();
        conn.get::<_, Option<Vec<u8>>>(key).await.unwrap()
    }

    #[tokio::test]
    async fn rediss_connects_over_tls_and_verifies_the_certificate() {
        let Some(server) = TestRedis::start("rediss") else {
            return;
        };
        let address = format!("rediss://127.0.0.1:{}", server.tls_port);
        let ctx = TestRedis::ctx(&[&address]);
        // The self-signed certificate is not among the system's trusted roots.
        let Err(RedisError::Other(text)) = open_connection(&address, &ctx).await else {
            panic!("a self-signed certificate was accepted");
        };
        assert!(text.contains("certificate verify failed"), "{text}");
        // redis-rs's `#insecure` skips the checks; the connection is TLS (the port speaks nothing else).
        let insecure = open_connection(&format!("{address}/#insecure"), &ctx).await.unwrap();
        assert_eq!(set_then_get(&insecure, "tls-key").await.as_deref(), Some(b"v".as_slice()));
        // The permission names the scheme: a `redis://` entry does not allow `rediss://`.
        let plain_only = TestRedis::ctx(&[&format!("redis://127.0.0.1:{}", server.tls_port)]);
        assert!(matches!(open_connection(&address, &plain_only).await, Err(RedisError::InvalidAddress)));
    }

    #[tokio::test]
    async fn user_password_and_database_in_the_address() {
        let Some(server) = TestRedis::start("redis-acl") else {
            return;
        };
        let ctx = TestRedis::ctx(&[&format!("redis://127.0.0.1:{}", server.port)]);
        let alice =
            open_connection(&format!("redis://alice:wonderland@127.0.0.1:{}/2", server.port), &ctx).await.unwrap();
        assert_eq!(set_then_get(&alice, "acl-key").await.as_deref(), Some(b"v".as_slice()));
        let database_two = open_connection(&format!("redis://127.0.0.1:{}/2", server.port), &ctx).await.unwrap();
        let database_zero = open_connection(&format!("redis://127.0.0.1:{}", server.port), &ctx).await.unwrap();
        let read = |connection: &RedisConnection| {
            let mut conn = connection.conn.clone();
            async move { conn.get::<_, Option<Vec<u8>>>("acl-key").await.unwrap() }
        };
        assert_eq!(read(&database_two).await.as_deref(), Some(b"v".as_slice()));
        assert_eq!(read(&database_zero).await, None);
        let wrong = open_connection(&format!("redis://alice:rabbit@127.0.0.1:{}/2", server.port), &ctx).await;
        assert!(
            matches!(&wrong, Err(RedisError::Other(text)) if text.contains("AuthenticationFailed")),
            "{:?}",
            wrong.err()
        );
    }
}
