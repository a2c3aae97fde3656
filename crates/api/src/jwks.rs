//! The identity provider's signing keys, from its JWKS URL (`jwks_url`),
//! fetched through Spin's outbound HTTP and kept per instance.
//!
//! An instance serves many requests, so the keys are fetched once and kept
//! for [`MAX_AGE`]. A token naming a `kid` the set does not hold makes one
//! new fetch (a provider rotating its keys publishes the new one first), at
//! most once per [`REFETCH_PAUSE`], so that tokens with made-up `kid`s cannot
//! turn every call into a fetch. A fetch that fails or takes longer than
//! [`FETCH_TIMEOUT`] leaves the keys held, if any, in use.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Limited};
use serde_json::Value;

use crate::Problem;
use crate::jwt::Key;

/// How long fetched keys are used before they are fetched again.
const MAX_AGE: Duration = Duration::from_secs(600);

/// The least time between two fetches made for an unknown `kid`.
const REFETCH_PAUSE: Duration = Duration::from_secs(10);

/// How long a fetch may take, from the request to the last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// A JWKS larger than this is refused (providers publish a few keys).
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// The keys fetched from one URL.
struct Fetched {
    url: String,
    keys: Rc<Vec<Key>>,
    at: Instant,
}

thread_local! {
    /// The instance's keys (a wasm instance has one thread; requests it
    /// serves concurrently interleave only at `.await`s, none of which
    /// holds this borrowed).
    static HELD: RefCell<Option<Fetched>> = const { RefCell::new(None) };
    /// When the last fetch for an unknown `kid` started, whatever its outcome.
    static LAST_REFETCH: RefCell<Option<Instant>> = const { RefCell::new(None) };
}

/// Why a kid was asked for: the keys held may be used, or new ones are needed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The keys held, fetched if none are held or they are too old.
    Current,
    /// Keys newer than those held: the token names a `kid` they lack.
    Newer,
}

/// The keys of the JWKS at `url`. With `Want::Newer`, fetches again unless
/// such a fetch started less than [`REFETCH_PAUSE`] ago (then the keys held).
pub async fn keys(url: &str, want: Want) -> Result<Rc<Vec<Key>>, Problem> {
    let held = HELD
        .with_borrow(|held| held.as_ref().filter(|f| f.url == url).map(|f| (f.keys.clone(), f.at.elapsed() < MAX_AGE)));
    let recently = LAST_REFETCH.with_borrow(|at| at.is_some_and(|at| at.elapsed() < REFETCH_PAUSE));
    match (&held, want) {
        (Some((keys, true)), Want::Current) => return Ok(keys.clone()),
        (Some((keys, _)), Want::Newer) if recently => return Ok(keys.clone()),
        (_, Want::Newer) => LAST_REFETCH.with_borrow_mut(|at| *at = Some(Instant::now())),
        _ => {}
    }
    match fetch(url).await {
        Ok(keys) => {
            let keys = Rc::new(keys);
            HELD.with_borrow_mut(|held| {
                *held = Some(Fetched { url: url.to_string(), keys: keys.clone(), at: Instant::now() })
            });
            Ok(keys)
        }
        Err(Failure::Denied) => Err(Problem::misconfigured(
            "the host of jwks_url is not in allowed_outbound_hosts: set jwks_host to its origin",
        )),
        Err(Failure::Failed(reason)) => {
            eprintln!("unread: the JWKS at jwks_url could not be fetched: {reason}");
            match held {
                Some((keys, _)) => Ok(keys),
                None => Err(Problem::unavailable(format!("the JWKS at jwks_url could not be fetched: {reason}"))),
            }
        }
    }
}

/// Why a fetch brought no keys.
enum Failure {
    /// The platform refused the request: `allowed_outbound_hosts` lacks the host.
    Denied,
    /// Anything else; the text says what, for the log.
    Failed(String),
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure::Failed(reason)
    }
}

/// One GET of the JWKS, bounded in time and size; its usable keys.
async fn fetch(url: &str) -> Result<Vec<Key>, Failure> {
    use spin_sdk::wasip3::http::types::ErrorCode;
    let request = http::Request::get(url)
        .header("accept", "application/json")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|_| "jwks_url is not a valid URL".to_string())?;
    let body = async {
        let response = spin_sdk::http::send(request).await.map_err(|e| match e {
            ErrorCode::HttpRequestDenied => Failure::Denied,
            other => Failure::Failed(format!("the request failed: {other:?}")),
        })?;
        if !response.status().is_success() {
            return Err(Failure::Failed(format!("the server answered {}", response.status())));
        }
        let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|_| Failure::Failed(format!("the body could not be read or is over {MAX_JWKS_BYTES} bytes")))?;
        Ok(body.to_bytes())
    };
    let body = within(FETCH_TIMEOUT, body).await.ok_or_else(|| format!("no answer within {FETCH_TIMEOUT:?}"))??;
    Ok(parse(&body)?)
}

/// The keys of a JWKS document that unread can use; malformed ones are
/// logged and skipped, so one bad key does not lock every user out.
fn parse(body: &[u8]) -> Result<Vec<Key>, String> {
    let document: Value = serde_json::from_slice(body).map_err(|_| "the body is not JSON".to_string())?;
    let listed = document.get("keys").and_then(Value::as_array).ok_or("the body has no \"keys\" list")?;
    let mut keys = Vec::new();
    for jwk in listed {
        match jwk.as_object().map(Key::from_jwk) {
            Some(Ok(Some(key))) => keys.push(key),
            Some(Ok(None)) => {}
            Some(Err(reason)) => eprintln!("unread: a key of the JWKS at jwks_url is skipped: {reason}"),
            None => eprintln!("unread: a key of the JWKS at jwks_url is skipped: it is not an object"),
        }
    }
    if keys.is_empty() {
        return Err("it holds no RS256, ES256 or EdDSA signing key".into());
    }
    Ok(keys)
}

/// `work`'s output, or `None` if `limit` passes first.
async fn within<T>(limit: Duration, work: impl Future<Output = T>) -> Option<T> {
    let mut work = std::pin::pin!(work);
    let mut timer = std::pin::pin!(spin_sdk::time::sleep(limit));
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(out) = work.as_mut().poll(cx) {
            return std::task::Poll::Ready(Some(out));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwks_gives_its_usable_keys() {
        let ed = |x: &str| serde_json::json!({"kty": "OKP", "crv": "Ed25519", "kid": x, "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"});
        let body = serde_json::json!({"keys": [ed("a"), {"kty": "oct", "k": "AA"}, {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}, 7, ed("b")]});
        let keys = parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(keys.len(), 2, "the oct key is not ours, the EC one malformed, 7 not a key");
        for bad in [&b"not json"[..], br#"{"keys":{}}"#, br#"{"keys":[]}"#, br#"{"keys":[{"kty":"oct","k":"AA"}]}"#] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
