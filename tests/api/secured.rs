//! A production Redis has a password, TLS and maybe a database number: all
//! of it goes in `redis_url` (a secret), while Spin's allowed hosts take the
//! server alone from `redis_host`.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{App, Setup, message};

/// A redis-server that speaks TLS only, with a self-signed certificate for
/// 127.0.0.1 and a password; stopped on drop.
struct TlsRedis {
    child: Child,
    dir: std::path::PathBuf,
    port: u16,
}

const PASSWORD: &str = "tls-redis-password";

impl TlsRedis {
    fn start() -> TlsRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("unread-tls-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=unread test"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "key.pem", "-out", "cert.pem"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl makes the test certificate");
        assert!(made.success());
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--tls-cert-file", "cert.pem", "--tls-key-file", "key.pem", "--tls-auth-clients", "no"])
            .args(["--requirepass", PASSWORD])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let redis = TlsRedis { child, dir, port };
        for _ in 0..200 {
            if redis.cli(&["PING"]).is_some_and(|out| out.trim() == "PONG") {
                return redis;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the TLS redis-server did not start");
    }

    /// `redis-cli` over TLS against database 3.
    fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["--tls", "--insecure", "-h", "127.0.0.1", "-p", &self.port.to_string(), "-a", PASSWORD, "-n", "3"])
            .arg("--no-auth-warning")
            .args(args)
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn app_on(redis: &TlsRedis, verify: bool) -> App {
    let fragment = if verify { "" } else { "#insecure" };
    App::with(Setup {
        variables: vec![
            ("redis_url", format!("rediss://:{PASSWORD}@127.0.0.1:{}/3{fragment}", redis.port)),
            ("redis_host", format!("rediss://127.0.0.1:{}", redis.port)),
        ],
        // One server with TLS and database 3 (a cluster has database 0 only).
        ..Setup::one_server()
    })
    .await
}

#[tokio::test]
async fn a_redis_with_a_password_tls_and_a_database_works() {
    let redis = TlsRedis::start();
    let app = app_on(&redis, false).await;
    assert_eq!(app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await.status, 200);
    assert_eq!(app.badge("acme", "u2").await.body["total"], 1);
    let keys = redis.cli(&["KEYS", "*"]).unwrap();
    assert!(keys.contains("un:v2:{acme:u2}:list"), "the state is in database 3: {keys}");
    assert!(app.redis.keys().is_empty(), "nothing went to the plain Redis");
}

/// Spin verifies Redis's certificate: a self-signed one is refused (a 503
/// that says nothing of the password) unless the URL says `#insecure`.
#[tokio::test]
async fn an_unverified_certificate_is_refused() {
    let redis = TlsRedis::start();
    let app = app_on(&redis, true).await;
    let answer = app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    assert_eq!(answer.status, 503, "{:?}", answer.body);
    assert!(!answer.body.to_string().contains(PASSWORD), "{}", answer.body);
}
