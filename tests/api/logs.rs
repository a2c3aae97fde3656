//! What an operator sees: reconcile's drift warnings in the log, from the
//! `unread-host up` binary (as `scripts/run` serves it), stderr captured.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::store::{Kind, MessageStore};
use crate::support::{ADMIN_TOKEN, JWT_SECRET, RedisServer, SERVICE_TOKEN};

/// The host binary, built beside this test binary by `cargo test -p unread-host`.
fn host_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let binary = exe.parent().unwrap().parent().unwrap().join("unread-host");
    assert!(binary.exists(), "{} missing: run the tests with -p unread-host too", binary.display());
    binary
}

#[tokio::test]
async fn drift_above_the_threshold_is_logged_as_a_warning_line() {
    let store = MessageStore::create(Kind::Postgres).await;
    let redis = RedisServer::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spin.toml");
    let mut host = Command::new(host_binary())
        .args(["up", "--listen", &format!("127.0.0.1:{port}"), "--manifest", manifest.to_str().unwrap()])
        .env("SPIN_VARIABLE_REDIS_URL", redis.url())
        .env("SPIN_VARIABLE_JWT_SECRET", JWT_SECRET)
        .env("SPIN_VARIABLE_SERVICE_TOKEN", SERVICE_TOKEN)
        .env("SPIN_VARIABLE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SPIN_VARIABLE_SQL_URL", &store.url)
        .env("SPIN_VARIABLE_SQL_HOST", "postgres://127.0.0.1:5432")
        .env("SPIN_VARIABLE_DRIFT_ALERT_THRESHOLD", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Messages the app stored but never touched: u2 drifts by 5 in c1, 1 in c2.
    let members = ["u1".to_string(), "u2".to_string()];
    store.create_conversation("acme", "c1", "chat", &members).await;
    store.create_conversation("acme", "c2", "chat", &members).await;
    for seq in 1..=5 {
        store.store_message("acme", "c1", seq, 1_000 + seq, "u1", "{}").await;
    }
    store.store_message("acme", "c2", 1, 2_000, "u1", "{}").await;

    // The host compiles every component before it serves: wait for its
    // "Serving" line rather than guessing how long that takes.
    let mut stdout = std::io::BufReader::new(host.stdout.take().unwrap());
    let ready = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut stdout, &mut line).is_ok_and(|n| n > 0) {
            if line.starts_with("Serving") {
                return true;
            }
            line.clear();
        }
        false
    });
    assert!(tokio::time::timeout(Duration::from_secs(300), ready).await.unwrap().unwrap(), "the host did not start");
    let report = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/v1/admin/reconcile"))
        .bearer_auth(ADMIN_TOKEN)
        .body(json!({"tenant": "acme", "users": ["u2"]}).to_string())
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .ok();
    host.kill().unwrap();
    host.wait().unwrap();
    let mut log = String::new();
    host.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert_eq!(report, Some(json!({"checked": 1, "drifted": 1, "fixed": 1, "max_drift": 5, "next_cursor": null})));
    assert!(log.contains("unread: warning: drift tenant=acme user=u2 conversation=c1 redis=0 truth=5"), "{log}");
    assert!(
        log.contains("unread: warning: drift tenant=acme user=u2 conversation=badge:chat redis=0 truth=6"),
        "{log}"
    );
    assert!(!log.contains("conversation=c2"), "a drift of 1 is under the threshold: {log}");
    store.drop_database().await;
}
