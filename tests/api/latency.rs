//! Whether an answer's headers and body reach the client together.
//!
//! With Nagle's algorithm on (Spin's HTTP trigger and this host leave it on),
//! a body written after the headers have gone out alone waits for the
//! client's delayed ACK of the headers: about 40 ms on Linux. So every answer
//! should leave as one write. These tests read answers off a raw keep-alive
//! connection and count those whose body came in a later read than their
//! headers — no clocks involved. docs/latency.md has the whole story.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::json;

use crate::support::{App, jwt, message};

/// How many of `requests`, sent one after the other on one keep-alive
/// connection, were answered with the headers in one read and (part of) the
/// body only in a later one. Runs on its own thread, off the host's runtime.
async fn split_answers(app: &App, requests: Vec<Vec<u8>>) -> usize {
    let address = app.address();
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(address).unwrap();
        requests.iter().filter(|request| answer_is_split(&mut stream, request)).count()
    })
    .await
    .unwrap()
}

/// Sends `request` and reads its answer; true if the first read ended
/// within the headers or before the whole body (`Content-Length`).
fn answer_is_split(stream: &mut TcpStream, request: &[u8]) -> bool {
    stream.write_all(request).unwrap();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut received = Vec::new();
    let mut reads = 0;
    loop {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "the host closed the connection");
        received.extend_from_slice(&buffer[..n]);
        reads += 1;
        let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .expect("every answer has Content-Length")
            .trim()
            .parse()
            .unwrap();
        let body = received.len() - end - 4;
        assert!(body <= length, "more bytes than one answer: pipelining is not used here");
        if body == length {
            return reads > 1;
        }
    }
}

/// An HTTP/1.1 request as bytes.
fn request(method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nhost: unread\r\n");
    if let Some(token) = token {
        text.push_str(&format!("authorization: Bearer {token}\r\n"));
    }
    if let Some(body) = body {
        text.push_str(&format!("content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()));
    } else {
        text.push_str("\r\n");
    }
    text.into_bytes()
}

const CALLS: usize = 200;

/// The control: answers that need no I/O in the host (the 404 route, a
/// refused token) leave with their headers, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_host_io_arrive_with_their_headers() {
    let app = App::start().await;
    let mut requests = Vec::new();
    for i in 0..CALLS {
        requests.push(request("GET", &format!("/nowhere/{i}"), None, None));
        requests.push(request("GET", "/v1/badge", None, None));
    }
    assert_eq!(split_answers(&app, requests).await, 0, "answers whose body left after their headers");
}

/// Redis-backed calls (badge, list, mark-read) whose answers should leave
/// with their headers too. Under Spin 4.1's machinery (wasmtime-wasi-http's
/// `ProxyHandler`, which this host drives) they do not always: the response
/// reaches the HTTP connection before the body bytes have been moved out of
/// the guest's stream, and when the connection's task runs on another
/// worker thread than the instance it flushes the headers alone. Nothing in
/// the guest can order that (docs/latency.md), so this test fails today; it
/// is kept, ignored, to show when Spin or wasmtime fix it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fails under Spin 4.1's wasmtime-wasi-http: the body can leave after the headers (docs/latency.md)"]
async fn redis_backed_answers_arrive_with_their_headers() {
    let app = App::start().await;
    let members: Vec<String> = (0..20).map(|k| format!("u{k}")).collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    assert_eq!(app.touch(message("acme", "g", 1, 1_764_460_800_000, "u0", &names)).await.status, 200);
    let mut requests = Vec::new();
    for i in 0..CALLS {
        let token = jwt("acme", &format!("u{}", i % 20));
        requests.push(request("GET", "/v1/badge", Some(&token), None));
        requests.push(request("GET", "/v1/conversations?limit=20", Some(&token), None));
        let body = json!({"conversation": "g", "seq": 1}).to_string();
        requests.push(request("POST", "/v1/mark-read", Some(&token), Some(&body)));
    }
    let split = split_answers(&app, requests).await;
    assert_eq!(split, 0, "{split} of {} Redis-backed answers left their body after their headers", 3 * CALLS);
}
