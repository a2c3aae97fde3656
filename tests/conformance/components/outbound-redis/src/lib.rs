//! Spin's outbound Redis conformance component, on spin-sdk 7 (`spin:redis@3.0.0`).
//!
//! The address comes from the `redis_address` request header, as in the
//! conformance suite. The answer is `200` with an empty body when every check
//! holds, `500` with the text of the first failed check otherwise, and `400`
//! without the header. When the connection cannot be opened, the body is the
//! error's own text (`Error::InvalidAddress` for an address the manifest does
//! not allow): that is what the suite's no-permission case checks.
//!
//! Paths:
//! - `/`: the suite's sequence (set, get, incr, del, execute with binary
//!   arguments, append, get), the `execute` checks the suite ran before it
//!   was trimmed and Spin's own runtime test still runs (int64 arguments,
//!   integer and binary results, sadd/smembers/srem), the typed set calls, and
//!   the error variants Spin maps Redis failures to.
//! - `/resp3`: over a RESP3 connection, the reply types RESP2 lacks, which
//!   Spin's `execute` converts or refuses in its own way.
//! - `/result-limit`: a value over Spin's 128 MiB limit on what the host
//!   buffers for a guest; Spin refuses it on `get` and `execute`.
//! - `/database`: the address may name a database (`/1`); the permission
//!   is for the server, whatever the database.
//! - `/open-fails-other`: `open` must fail with `other` (what Spin gives when
//!   the component's permissions cannot be resolved at run time).
//! - `/connection-cap`: Spin keeps at most 1024 open Redis connections per
//!   instance; opening one more fails with `too-many-connections` until one
//!   is dropped.

use spin_sdk::http::{HeaderMap, HeaderName, HeaderValue, IntoResponse, Request, StatusCode};
use spin_sdk::http_service;
use spin_sdk::redis::{Connection, Error, RedisParameter, RedisResult};

/// Spin's limit on the bytes of one reply it buffers for a guest (128 MiB).
const MAX_HOST_BUFFERED_BYTES: usize = 128 << 20;

/// How many Redis connections one Spin instance may hold open at once (the
/// capacity of the table Spin keeps them in).
const MAX_CONNECTIONS_PER_INSTANCE: usize = 1024;

type Checked = Result<(), String>;

/// Fails the run with a message when a condition does not hold.
macro_rules! check {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(format!($($message)+));
        }
    };
}

#[http_service]
async fn handler(request: Request) -> impl IntoResponse {
    let Some(address) = request.headers().get("redis_address").and_then(|value| value.to_str().ok()) else {
        return answer(StatusCode::BAD_REQUEST, "missing header: REDIS_ADDRESS".to_owned());
    };
    let address = address.to_owned();
    let outcome = match request.uri().path() {
        "/" => conformance(&address).await,
        "/resp3" => resp3(&address).await,
        "/result-limit" => result_limit(&address).await,
        "/database" => database(&address).await,
        "/open-fails-other" => open_fails_other(&address).await,
        "/connection-cap" => connection_cap(&address).await,
        other => Err(format!("no check at {other}")),
    };
    match outcome {
        Ok(()) => answer(StatusCode::OK, String::new()),
        Err(failure) => answer(StatusCode::INTERNAL_SERVER_ERROR, failure),
    }
}

/// The response, with its length declared in `content-length`.
///
/// The suite's components are WASIp2 ones, for which the host knows an empty
/// body's length and sends `Content-Length: 0`, as the suite expects. A WASIp3
/// body is a stream: Spin (like the host, with the same wasmtime-wasi-http)
/// learns its length only from this header; without it the host sent the
/// empty body chunked.
fn answer(status: StatusCode, body: String) -> impl IntoResponse {
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static("content-length"), HeaderValue::from(body.len()));
    (status, headers, body)
}

/// Opens a connection; the error's text is the failure, as in the suite's helper.
async fn open(address: &str) -> Result<Connection, String> {
    Connection::open(address).await.map_err(|error| error.to_string())
}

/// `Ok` of a Redis call, or the call and its error as the failure.
fn ok<T>(what: &str, result: Result<T, Error>) -> Result<T, String> {
    result.map_err(|error| format!("{what} failed: {error:?}"))
}

fn binary(bytes: &[u8]) -> RedisParameter {
    RedisParameter::Binary(bytes.to_vec())
}

async fn conformance(address: &str) -> Checked {
    let connection = open(address).await?;
    suite_sequence(&connection).await?;
    execute_types(&connection).await?;
    typed_sets(&connection).await?;
    error_variants(&connection).await
}

/// The conformance suite's own sequence.
async fn suite_sequence(connection: &Connection) -> Checked {
    ok("set", connection.set("spin-example-get-set", b"Eureka!").await)?;
    let payload = ok("get", connection.get("spin-example-get-set").await)?;
    check!(payload.as_deref() == Some(b"Eureka!".as_slice()), "get returned {payload:?}, not Eureka!");

    ok("set", connection.set("spin-example-incr", b"0").await)?;
    let incremented = ok("incr", connection.incr("spin-example-incr").await)?;
    check!(incremented == 1, "incr returned {incremented}, not 1");

    let deleted = ok("del", connection.del(["spin-example-get-set", "spin-example-incr"]).await)?;
    check!(deleted == 2, "del returned {deleted}, not 2");

    ok("execute set", connection.execute("set", [binary(b"spin-example"), binary(b"Eureka!")]).await)?;
    ok("execute append", connection.execute("append", [binary(b"spin-example"), binary(b" I've got it!")]).await)?;
    let values = ok("execute get", connection.execute("get", [binary(b"spin-example")]).await)?;
    check!(
        matches!(values.as_slice(), [RedisResult::Binary(b)] if b == b"Eureka! I've got it!"),
        "execute get returned {values:?}"
    );
    Ok(())
}

/// `execute` with int64 arguments, integer and status results, and a set
/// command whose reply is an array (flattened into the result list).
async fn execute_types(connection: &Connection) -> Checked {
    let values = ok("execute set", connection.execute("set", [binary(b"int-key"), RedisParameter::Int64(0)]).await)?;
    check!(
        matches!(values.as_slice(), [RedisResult::Status(s)] if s == "OK"),
        "execute set returned {values:?}, not [Status(\"OK\")]"
    );
    let values = ok("execute incr", connection.execute("incr", [binary(b"int-key")]).await)?;
    check!(matches!(values.as_slice(), [RedisResult::Int64(1)]), "execute incr returned {values:?}, not [Int64(1)]");
    let values = ok("execute get", connection.execute("get", [binary(b"int-key")]).await)?;
    check!(matches!(values.as_slice(), [RedisResult::Binary(b)] if b == b"1"), "execute get returned {values:?}");

    let values = ok("execute get (missing key)", connection.execute("get", [binary(b"no-such-key")]).await)?;
    check!(matches!(values.as_slice(), [RedisResult::Nil]), "execute get of a missing key returned {values:?}");

    ok("execute del", connection.execute("del", [binary(b"foo")]).await)?;
    ok("execute sadd", connection.execute("sadd", [binary(b"foo"), binary(b"bar"), binary(b"baz")]).await)?;
    let values = ok("execute smembers", connection.execute("smembers", [binary(b"foo")]).await)?;
    let mut members = values
        .iter()
        .map(|value| match value {
            RedisResult::Binary(member) => Ok(member.as_slice()),
            other => Err(format!("execute smembers returned a non-binary value {other:?}")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    members.sort();
    check!(members == [b"bar".as_slice(), b"baz"], "execute smembers returned {values:?}");

    ok("execute srem", connection.execute("srem", [binary(b"foo"), binary(b"baz")]).await)?;
    let values = ok("execute smembers", connection.execute("smembers", [binary(b"foo")]).await)?;
    check!(matches!(values.as_slice(), [RedisResult::Binary(b)] if b == b"bar"), "smembers after srem: {values:?}");

    ok("execute del", connection.execute("del", [binary(b"foo"), binary(b"int-key")]).await)?;
    Ok(())
}

/// The typed set functions: counts of added and removed members, members as strings.
async fn typed_sets(connection: &Connection) -> Checked {
    ok("del", connection.del(["spin-example-set"]).await)?;
    let added = ok("sadd", connection.sadd("spin-example-set", ["bar", "baz"]).await)?;
    check!(added == 2, "sadd of two new members returned {added}, not 2");
    let added = ok("sadd", connection.sadd("spin-example-set", ["bar"]).await)?;
    check!(added == 0, "sadd of a present member returned {added}, not 0");
    let mut members = ok("smembers", connection.smembers("spin-example-set").await)?;
    members.sort();
    check!(members == ["bar", "baz"], "smembers returned {members:?}");
    let removed = ok("srem", connection.srem("spin-example-set", ["baz", "absent"]).await)?;
    check!(removed == 1, "srem of one present and one absent member returned {removed}, not 1");
    let members = ok("smembers", connection.smembers("spin-example-set").await)?;
    check!(members == ["bar"], "smembers after srem returned {members:?}");
    let members = ok("smembers", connection.smembers("spin-example-no-set").await)?;
    check!(members.is_empty(), "smembers of a missing key returned {members:?}");
    let missing = ok("get", connection.get("spin-example-no-key").await)?;
    check!(missing.is_none(), "get of a missing key returned {missing:?}");
    ok("del", connection.del(["spin-example-set"]).await)?;
    Ok(())
}

/// Which variant Spin gives for failures: Redis's own errors (a wrong type, a
/// non-integer, an unknown command) are all `other` with the client's text;
/// `type-error` is only for replies the client cannot convert.
async fn error_variants(connection: &Connection) -> Checked {
    ok("set", connection.set("spin-example-text", b"not a number").await)?;
    let result = connection.incr("spin-example-text").await;
    check!(
        matches!(&result, Err(Error::Other(text)) if text.contains("not an integer")),
        "incr of a non-integer returned {result:?}, not other(..not an integer..)"
    );
    let result = connection.sadd("spin-example-text", ["member"]).await;
    check!(
        matches!(&result, Err(Error::Other(text)) if text.contains("WRONGTYPE")),
        "sadd on a string key returned {result:?}, not other(WRONGTYPE..)"
    );
    let result = connection.execute("no-such-command", []).await;
    check!(
        matches!(&result, Err(Error::Other(text)) if text.contains("unknown command")),
        "execute of an unknown command returned {result:?}, not other(..unknown command..)"
    );
    ok("del", connection.del(["spin-example-text"]).await)?;
    Ok(())
}

/// Replies only RESP3 has, as Spin's `execute` converts them: a double
/// (`ZSCORE`) and a big number become their text, a boolean the integer 1 or
/// 0; a map (`HGETALL`) and a verbatim string (`INFO`) fail with `other`
/// naming the type. The booleans and the big number come from Lua scripts
/// that ask for RESP3 (`redis.setresp(3)`). Beside them, an error inside a
/// reply fails the call with that error's text. Every check runs; the
/// failure lists each one that did not hold.
async fn resp3(address: &str) -> Checked {
    let connection = open(&format!("{address}/?protocol=resp3")).await?;
    ok("del", connection.del(["spin-example-hash", "spin-example-zset"]).await)?;
    ok("execute hset", connection.execute("hset", [binary(b"spin-example-hash"), binary(b"f"), binary(b"v")]).await)?;
    ok("execute zadd", connection.execute("zadd", [binary(b"spin-example-zset"), binary(b"1.5"), binary(b"m")]).await)?;
    let mut wrong = Vec::new();
    let double = connection.execute("zscore", [binary(b"spin-example-zset"), binary(b"m")]).await;
    if !matches!(double.as_deref(), Ok([RedisResult::Binary(text)]) if text == b"1.5") {
        wrong.push(format!("execute zscore (a double) returned {double:?}, not [Binary(\"1.5\")]"));
    }
    let map = connection.execute("hgetall", [binary(b"spin-example-hash")]).await;
    if !matches!(&map, Err(Error::Other(text)) if text.contains("Redis Map type is not supported")) {
        wrong.push(format!("execute hgetall (a map) returned {map:?}, not other(..Redis Map type is not supported)"));
    }
    let verbatim = connection.execute("info", [binary(b"server")]).await;
    if !matches!(&verbatim, Err(Error::Other(text)) if text.contains("Redis string with format attribute is not supported"))
    {
        let shown = verbatim.as_ref().map(|values| values.len());
        wrong.push(format!(
            "execute info (a verbatim string) returned {shown:?} (number of results), \
             not other(..Redis string with format attribute is not supported)"
        ));
    }
    let booleans =
        connection.execute("eval", [binary(b"redis.setresp(3); return {1, {false, true}}"), binary(b"0")]).await;
    if !matches!(booleans.as_deref(), Ok([RedisResult::Int64(1), RedisResult::Int64(0), RedisResult::Int64(1)])) {
        wrong.push(format!("execute eval (booleans) returned {booleans:?}, not [Int64(1), Int64(0), Int64(1)]"));
    }
    let big = "123456789012345678901234567890";
    let script = format!("redis.setresp(3); return {{big_number='{big}'}}");
    let big_number = connection.execute("eval", [binary(script.as_bytes()), binary(b"0")]).await;
    if !matches!(big_number.as_deref(), Ok([RedisResult::Binary(text)]) if text == big.as_bytes()) {
        wrong.push(format!("execute eval (a big number) returned {big_number:?}, not [Binary({big:?})]"));
    }
    let nested =
        connection.execute("eval", [binary(b"return {1, {2, redis.error_reply('MYERR boom')}}"), binary(b"0")]).await;
    if !matches!(&nested, Err(Error::Other(text)) if text == "MYERR: boom") {
        wrong.push(format!("execute eval (an error inside a reply) returned {nested:?}, not other(\"MYERR: boom\")"));
    }
    ok("del", connection.del(["spin-example-hash", "spin-example-zset"]).await)?;
    if wrong.is_empty() { Ok(()) } else { Err(wrong.join("\n")) }
}

/// A value one byte over the limit (made by Redis itself with `SETRANGE`):
/// `get` and `execute` fail with Spin's `other` text and hand nothing over.
async fn result_limit(address: &str) -> Checked {
    let connection = open(address).await?;
    let offset = i64::try_from(MAX_HOST_BUFFERED_BYTES).map_err(|e| e.to_string())?;
    let outcome = async {
        ok(
            "execute setrange",
            connection
                .execute("setrange", [binary(b"spin-example-big"), RedisParameter::Int64(offset), binary(b"x")])
                .await,
        )?;
        let expected = format!("query result exceeds limit of {MAX_HOST_BUFFERED_BYTES} bytes");
        let got = connection.get("spin-example-big").await;
        check!(
            matches!(&got, Err(Error::Other(text)) if *text == expected),
            "get of a value over the limit returned {}, not other({expected:?})",
            describe(&got.map(|value| value.map(|v| v.len())))
        );
        let got = connection.execute("get", [binary(b"spin-example-big")]).await;
        check!(
            matches!(&got, Err(Error::Other(text)) if *text == expected),
            "execute get of a value over the limit returned {}, not other({expected:?})",
            describe(&got.map(|values| values.len()))
        );
        Ok(())
    }
    .await;
    ok("del", connection.del(["spin-example-big"]).await)?;
    outcome
}

/// Database 1 and database 0 of the same server are separate key spaces.
async fn database(address: &str) -> Checked {
    let default = open(address).await?;
    let one = open(&format!("{address}/1")).await?;
    ok("del", default.del(["spin-example-db"]).await)?;
    ok("set", one.set("spin-example-db", b"in database 1").await)?;
    let in_default = ok("get", default.get("spin-example-db").await)?;
    let in_one = ok("get", one.get("spin-example-db").await)?;
    ok("del", one.del(["spin-example-db"]).await)?;
    check!(in_default.is_none(), "database 0 holds a key set in database 1: {in_default:?}");
    check!(in_one.as_deref() == Some(b"in database 1".as_slice()), "database 1 returned {in_one:?}");
    Ok(())
}

/// `open` fails with `other`, whatever the text.
async fn open_fails_other(address: &str) -> Checked {
    let result = Connection::open(address).await;
    check!(
        matches!(result, Err(Error::Other(_))),
        "open returned {}, not other(..)",
        describe(&result.map(|_| "a connection"))
    );
    Ok(())
}

/// Holds [`MAX_CONNECTIONS_PER_INSTANCE`] connections, then opens one more.
async fn connection_cap(address: &str) -> Checked {
    let mut held = Vec::with_capacity(MAX_CONNECTIONS_PER_INSTANCE);
    for n in 0..MAX_CONNECTIONS_PER_INSTANCE {
        held.push(open(address).await.map_err(|e| format!("opening connection {}: {e}", n + 1))?);
    }
    let one_more = Connection::open(address).await;
    check!(
        matches!(one_more, Err(Error::TooManyConnections)),
        "opening connection {} while holding {MAX_CONNECTIONS_PER_INSTANCE} returned {}, not too-many-connections",
        MAX_CONNECTIONS_PER_INSTANCE + 1,
        describe(&one_more.map(|_| "a connection"))
    );
    held.pop();
    let after_drop = Connection::open(address).await;
    check!(
        after_drop.is_ok(),
        "opening a connection after dropping one returned {}",
        describe(&after_drop.map(|_| "a connection"))
    );
    Ok(())
}

/// A short description of a result whose success value is already summarised.
fn describe<T: std::fmt::Debug>(result: &Result<T, Error>) -> String {
    match result {
        Ok(summary) => format!("Ok({summary:?})"),
        Err(error) => format!("Err({error:?})"),
    }
}
