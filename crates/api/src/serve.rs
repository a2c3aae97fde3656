//! What happens around every request, in one place: its id, the error body
//! of a refusal, the `x-request-id` header, the operator's log of a 5xx and
//! one JSON log line per request; and browsers' cross-origin calls (see
//! [`crate::cors`]).
//!
//! The request id is the caller's `x-request-id` when that is a plain token
//! (1-64 of `[A-Za-z0-9._-]`), else a fresh random one; every answer carries
//! it back. Each request then writes one JSON line to stderr:
//!
//! ```text
//! {"function":"touch","method":"POST","status":200,"ms":1.23,"request_id":"…","tenant":"acme"}
//! ```
//!
//! (`tenant` when the call named one it was allowed to; never a user id, a
//! token or other personal data). A 5xx also writes, before it, one line
//! `unread: error: request_id=… function=… status=503 code=…: <detail>` with
//! what went wrong inside, which the answer never shows.

use std::cell::RefCell;
use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use spin_sdk::http::{HeaderValue, Request, Response};

use crate::render::Body;
use crate::{Answer, cors};

/// Serves one request with `handle` and does what every function does around
/// it (see the module documentation). `function` names the function in the log.
pub async fn serve<F, Fut>(function: &'static str, request: Request, handle: F) -> Response<Body>
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Answer>,
{
    let started = Instant::now();
    let request_id = request_id(request.headers().get("x-request-id"), random_id);
    let method = request.method().as_str().to_string();
    // A browser's preflight is answered here, without the handler; other
    // answers to an allowed origin get its headers at the end.
    let (answer, noted, origin) = match cors::allowed_origin(&request).await {
        Err(problem) => (Err(problem), Noted::default(), None),
        Ok(origin) if cors::is_preflight(&request) => (cors::preflight(origin), Noted::default(), None),
        Ok(origin) => {
            let (answer, noted) = Scoped::new(handle(request)).await;
            (answer, noted, origin)
        }
    };
    let mut response = match answer {
        Ok(response) => response,
        Err(problem) => {
            if problem.status.is_server_error() {
                log_line(&error_line(function, &request_id, problem.status.as_u16(), problem.code, &problem.detail));
            }
            problem.into_response(&request_id)
        }
    };
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    if let Some(origin) = &origin {
        cors::allow(&mut response, origin);
    }
    let line = access_line(function, &method, response.status().as_u16(), started, &request_id, noted.tenant);
    log_line(&line);
    response
}

/// Records the tenant a call acts for, for the request's log line. The
/// authentication and body parsers call it once the tenant is known to be a
/// valid identifier the caller may name.
pub(crate) fn note_tenant(tenant: &str) {
    CURRENT.with(|current| {
        if let Some(noted) = current.borrow_mut().as_mut() {
            noted.tenant = Some(tenant.to_string());
        }
    });
}

/// What a request noted about itself while it was handled.
#[derive(Default)]
struct Noted {
    tenant: Option<String>,
}

thread_local! {
    /// The notes of the request whose handler is being polled right now.
    /// One instance may serve several requests at once, their futures
    /// interleaved on one thread: each poll puts its request's notes here
    /// and takes them back after (see [`Scoped`]).
    static CURRENT: RefCell<Option<Noted>> = const { RefCell::new(None) };
}

/// A request's handler with its notes, installed in [`CURRENT`] while it is polled.
struct Scoped<F> {
    future: Pin<Box<F>>,
    noted: Option<Noted>,
}

impl<F: Future> Scoped<F> {
    fn new(future: F) -> Self {
        Scoped { future: Box::pin(future), noted: Some(Noted::default()) }
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = (F::Output, Noted);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let outer = CURRENT.with(|current| current.replace(this.noted.take()));
        let polled = this.future.as_mut().poll(cx);
        this.noted = CURRENT.with(|current| current.replace(outer));
        match polled {
            Poll::Ready(output) => Poll::Ready((output, this.noted.take().unwrap_or_default())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The caller's request id if it is a plain token (1-64 of
/// `A-Z a-z 0-9 . _ -`), else a fresh one.
fn request_id(given: Option<&HeaderValue>, fresh: impl FnOnce() -> String) -> String {
    let plain = |id: &&str| {
        (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    given.and_then(|value| value.to_str().ok()).filter(plain).map(str::to_string).unwrap_or_else(fresh)
}

/// 128 random bits as 32 hex digits, from the host's random source.
fn random_id() -> String {
    hex(&random_bytes())
}

#[cfg(target_arch = "wasm32")]
fn random_bytes() -> Vec<u8> {
    spin_sdk::wasip3::random::random::get_random_bytes(16)
}

/// Native builds (unit tests, lints) never serve requests; the time and a
/// counter stand in for the host's random source there.
#[cfg(not(target_arch = "wasm32"))]
fn random_bytes() -> Vec<u8> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    [nanos.to_le_bytes()[..8].to_vec(), count.to_le_bytes().to_vec()].concat()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The request's JSON log line.
fn access_line(
    function: &str,
    method: &str,
    status: u16,
    started: Instant,
    request_id: &str,
    tenant: Option<String>,
) -> String {
    let ms = (started.elapsed().as_secs_f64() * 100_000.0).round() / 100.0;
    let mut line = serde_json::json!({
        "function": function,
        "method": method,
        "status": status,
        "ms": ms,
        "request_id": request_id,
    });
    if let Some(tenant) = tenant {
        line["tenant"] = tenant.into();
    }
    line.to_string()
}

/// The operator's line about a 5xx: what went wrong, on one line, with the
/// request id; the password of any URL in it masked.
fn error_line(function: &str, request_id: &str, status: u16, code: &str, detail: &Option<String>) -> String {
    let detail = detail.as_deref().unwrap_or("no detail");
    let detail: String = mask_url_passwords(detail).chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    format!("unread: error: request_id={request_id} function={function} status={status} code={code}: {detail}")
}

/// `scheme://user:password@host` becomes `scheme://user:***@host`, wherever
/// such a URL appears in `text` (an error text may quote a connection URL).
fn mask_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends at the first '/', whitespace or quote; userinfo at its last '@'.
        let end = after.find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'').unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => {
                match userinfo.split_once(':') {
                    Some((user, _password)) => out.push_str(&format!("{user}:***")),
                    None => out.push_str(userinfo),
                }
                out.push('@');
                out.push_str(host);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Writes `line` and a newline to stderr in one write, so that lines of
/// instances writing at the same time do not mix.
fn log_line(line: &str) {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let _ = std::io::stderr().write_all(&bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_request_id_is_kept_and_anything_else_replaced() {
        let fresh = || "fresh".to_string();
        let id = |text: &str| request_id(Some(&HeaderValue::from_str(text).unwrap()), fresh);
        assert_eq!(id("abc-123_X.y"), "abc-123_X.y");
        assert_eq!(id(&"a".repeat(64)), "a".repeat(64));
        for bad in ["", "a b", "a/b", "{x}", "a\"b", "é", &"a".repeat(65)] {
            let given = HeaderValue::from_bytes(bad.as_bytes()).unwrap();
            assert_eq!(request_id(Some(&given), fresh), "fresh", "{bad:?}");
        }
        assert_eq!(request_id(None, fresh), "fresh");
    }

    #[test]
    fn fresh_ids_are_32_hex_digits_and_differ() {
        let (a, b) = (random_id(), random_id());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_access_line_is_json_with_the_documented_fields() {
        let line = access_line("touch", "POST", 200, Instant::now(), "r1", Some("acme".into()));
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["function", "method", "status", "ms", "request_id", "tenant"]);
        assert!(value["ms"].as_f64().unwrap() >= 0.0);
        let line = access_line("badge", "GET", 401, Instant::now(), "r2", None);
        assert!(serde_json::from_str::<serde_json::Value>(&line).unwrap().get("tenant").is_none());
    }

    #[test]
    fn error_lines_are_one_line_without_url_passwords() {
        let detail = Some("sql: cannot connect to postgres://app:s3cret@db:5432/x\nsecond line".to_string());
        let line = error_line("touch", "r1", 503, "unavailable", &detail);
        assert_eq!(
            line,
            "unread: error: request_id=r1 function=touch status=503 code=unavailable: \
             sql: cannot connect to postgres://app:***@db:5432/x second line"
        );
    }

    #[test]
    fn url_passwords_are_masked_wherever_they_are() {
        assert_eq!(
            mask_url_passwords("redis://:pw@h:1 and mysql://u:p@h/db"),
            "redis://:***@h:1 and mysql://u:***@h/db"
        );
        assert_eq!(mask_url_passwords("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(mask_url_passwords("postgres://user@h"), "postgres://user@h");
        assert_eq!(mask_url_passwords("x://a:b:c@h \"y://u:v@h\""), "x://a:***@h \"y://u:***@h\"");
        assert_eq!(mask_url_passwords("no url"), "no url");
    }

    #[test]
    fn notes_belong_to_the_request_being_polled() {
        let (answer, noted) = block_on(Scoped::new(async {
            note_tenant("acme");
            7
        }));
        assert_eq!((answer, noted.tenant.as_deref()), (7, Some("acme")));
        assert!(CURRENT.with(|c| c.borrow().is_none()), "the notes left with the request");
        note_tenant("nobody"); // outside any request: ignored
        assert!(CURRENT.with(|c| c.borrow().is_none()));
    }

    #[test]
    fn interleaved_requests_keep_their_own_notes() {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let request = |tenant: &'static str| {
            Scoped::new(async move {
                note_tenant(tenant);
                YieldOnce(false).await;
            })
        };
        let (mut a, mut b, mut c) = (request("a"), request("b"), Scoped::new(YieldOnce(false)));
        assert!(Pin::new(&mut a).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut b).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        let Poll::Ready(((), from_b)) = Pin::new(&mut b).poll(&mut cx) else { panic!("b waits") };
        let Poll::Ready(((), from_c)) = Pin::new(&mut c).poll(&mut cx) else { panic!("c waits") };
        let Poll::Ready(((), from_a)) = Pin::new(&mut a).poll(&mut cx) else { panic!("a waits") };
        assert_eq!((from_a.tenant.as_deref(), from_b.tenant.as_deref(), from_c.tenant), (Some("a"), Some("b"), None));
    }

    /// Waits once, then is ready.
    struct YieldOnce(bool);

    impl Future for YieldOnce {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            Poll::Pending
        }
    }

    /// Polls a future that never waits to its end.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("the future waited"),
        }
    }
}
