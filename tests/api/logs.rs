//! What an operator sees, from the `unread-host up` binary (as `scripts/run`
//! serves it), stdout and stderr captured: reconcile's drift warnings; one
//! JSON line per request; a 5xx's reason on one line with its request id;
//! no secret anywhere, in any answer or in the log, whatever fails; the
//! binary's refusal of a `jwt_secret` unread would not accept; and
//! `--component-id`, which serves one function alone.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::store::{Kind, MessageStore};
use crate::support::{ADMIN_TOKEN, Answer, JWT_SECRET, RedisServer, SERVICE_TOKEN, signed_jwt};

/// The host binary, built beside this test binary by `cargo build -p unread-host`.
fn host_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let binary = exe.parent().unwrap().parent().unwrap().join("unread-host");
    assert!(binary.exists(), "{} missing: run `cargo build --profile tools -p unread-host` first", binary.display());
    binary
}

fn manifest() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spin.toml")
}

/// `unread-host up -- …` with these `SPIN_VARIABLE_*` values and no others
/// from the test's environment.
fn host_command(port: u16, variables: &[(&str, String)]) -> Command {
    let mut command = Command::new(host_binary());
    command.args(["up", "--listen", &format!("127.0.0.1:{port}"), "--manifest", manifest().to_str().unwrap()]);
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("SPIN_VARIABLE_")) {
        command.env_remove(name);
    }
    for (name, value) in variables {
        command.env(format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()), value);
    }
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// `unread-host up` on a free port; stdout and stderr are read as they come
/// (so that a long run never blocks on a full pipe) and handed back by
/// [`Served::stop`].
struct Served {
    child: Child,
    base: String,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Served {
    /// Starts the host and waits for its "Serving" line.
    async fn start(variables: &[(&str, String)]) -> Served {
        Served::start_with(variables, &[]).await
    }

    /// Like [`Served::start`], with more arguments after `up`. A free port
    /// another test's server took before the host bound it is given up for
    /// another.
    async fn start_with(variables: &[(&str, String)], args: &[&str]) -> Served {
        for _ in 0..10 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            match Served::start_on(port, variables, args).await {
                Ok(served) => return served,
                Err((_, stderr)) if stderr.contains("Address already in use") => continue,
                Err((stdout, stderr)) => panic!("the host did not start:\n{stdout}\n{stderr}"),
            }
        }
        panic!("the host did not start on any of 10 free ports");
    }

    /// The host on `port`; what it wrote if it did not start.
    async fn start_on(port: u16, variables: &[(&str, String)], args: &[&str]) -> Result<Served, (String, String)> {
        let mut command = host_command(port, variables);
        command.args(args);
        let mut child = command.spawn().unwrap();
        let (ready, serving) = tokio::sync::oneshot::channel();
        let out = child.stdout.take().unwrap();
        // The host compiles every component before it serves: wait for its
        // "Serving" line rather than guessing how long that takes.
        let stdout = std::thread::spawn(move || {
            let mut ready = Some(ready);
            let mut seen = String::new();
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("Serving")
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(());
                }
                seen.push_str(&line);
                seen.push('\n');
            }
            seen
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut log = String::new();
            let _ = err.read_to_string(&mut log);
            log
        });
        let started = tokio::time::timeout(Duration::from_secs(300), serving).await;
        let served = Served { child, base: format!("http://127.0.0.1:{port}"), stdout, stderr };
        if !matches!(started, Ok(Ok(()))) {
            return Err(served.stop());
        }
        Ok(served)
    }

    /// Stops the host; what it wrote to stdout and to stderr.
    fn stop(mut self) -> (String, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.stdout.join().unwrap(), self.stderr.join().unwrap())
    }

    /// One request; `request_id` goes in `x-request-id`.
    async fn call(&self, call: &Call, request_id: Option<&str>) -> Answer {
        let method = reqwest::Method::from_bytes(call.method.as_bytes()).unwrap();
        let mut request = reqwest::Client::new().request(method, format!("{}{}", self.base, call.path));
        if let Some(token) = &call.token {
            request = request.bearer_auth(token);
        }
        if let Some(id) = request_id {
            request = request.header("x-request-id", id);
        }
        if let Some(body) = &call.body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        Answer::read(request.send().await.expect("the host answers")).await
    }
}

/// One request to make.
#[derive(Clone, Debug)]
struct Call {
    function: &'static str,
    method: &'static str,
    path: String,
    token: Option<String>,
    body: Option<Value>,
}

fn call(function: &'static str, method: &'static str, path: &str, token: Option<&str>, body: Option<Value>) -> Call {
    Call { function, method, path: path.to_string(), token: token.map(str::to_string), body }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// The variables every run needs: `redis`, and the test secrets.
fn essentials(redis: &RedisServer) -> Vec<(&'static str, String)> {
    vec![
        ("redis_url", redis.url()),
        ("redis_host", redis.host()),
        ("jwt_secret", JWT_SECRET.to_string()),
        ("service_token", SERVICE_TOKEN.to_string()),
        ("admin_token", ADMIN_TOKEN.to_string()),
    ]
}

/// An app token for `user` of `tenant`, signed with `secret`.
fn app_token(tenant: &str, user: &str, secret: &str, exp: u64) -> String {
    signed_jwt(r#"{"alg":"HS256","typ":"JWT"}"#, &json!({"sub": user, "tid": tenant, "exp": exp}), secret)
}

#[tokio::test]
async fn drift_above_the_threshold_is_logged_as_a_warning_line() {
    let store = MessageStore::create(Kind::Postgres).await;
    let redis = RedisServer::start();
    let mut variables = essentials(&redis);
    variables.extend([
        ("sql_url", store.url.clone()),
        ("sql_host", "postgres://127.0.0.1:5432".to_string()),
        ("drift_alert_threshold", "2".to_string()),
    ]);
    let host = Served::start(&variables).await;
    // Messages the app stored but never touched: u2 drifts by 5 in c1, 1 in c2.
    let members = ["u1".to_string(), "u2".to_string()];
    store.create_conversation("acme", "c1", "chat", &members).await;
    store.create_conversation("acme", "c2", "chat", &members).await;
    for seq in 1..=5 {
        store.store_message("acme", "c1", seq, 1_000 + seq, "u1", "{}").await;
    }
    store.store_message("acme", "c2", 1, 2_000, "u1", "{}").await;

    let reconcile = json!({"tenant": "acme", "users": ["u2"]});
    let report =
        host.call(&call("reconcile", "POST", "/v1/admin/reconcile", Some(ADMIN_TOKEN), Some(reconcile)), None).await;
    let (_, log) = host.stop();
    assert_eq!(report.body, json!({"checked": 1, "drifted": 1, "fixed": 1, "max_drift": 5, "next_cursor": null}));
    assert!(log.contains("unread: warning: drift tenant=acme user=u2 conversation=c1 redis=0 truth=5"), "{log}");
    assert!(
        log.contains("unread: warning: drift tenant=acme user=u2 conversation=badge:chat redis=0 truth=6"),
        "{log}"
    );
    assert!(!log.contains("conversation=c2"), "a drift of 1 is under the threshold: {log}");
    store.drop_database().await;
}

/// The JSON log lines of a run, by request id (each id's lines).
fn json_lines(log: &str) -> HashMap<String, Vec<Value>> {
    let mut lines: HashMap<String, Vec<Value>> = HashMap::new();
    for line in log.lines().filter(|l| l.starts_with('{')) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let id = value["request_id"].as_str().unwrap_or_else(|| panic!("no request_id: {line}")).to_string();
        lines.entry(id).or_default().push(value);
    }
    lines
}

#[tokio::test]
async fn every_request_writes_one_json_log_line_and_a_5xx_its_reason() {
    let redis = RedisServer::start();
    let host = Served::start(&essentials(&redis)).await;
    // A user id that must never reach a log line.
    let user = "person-7f3a9c";
    let token = app_token("acme", user, JWT_SECRET, now() + 3600);
    let touch = json!({"tenant": "acme", "conversation": "c1", "seq": 1, "ts": 1_000, "sender": "u1",
        "members": ["u1", user], "preview": {"text": "hi"}});
    // (call, expected status, the tenant the line names)
    let calls = [
        (call("touch", "POST", "/v1/touch", Some(SERVICE_TOKEN), Some(touch)), 200, Some("acme")),
        (call("badge", "GET", "/v1/badge", Some(&token), None), 200, Some("acme")),
        (call("list", "GET", "/v1/conversations?limit=5", Some(&token), None), 200, Some("acme")),
        (
            call("mark-read", "POST", "/v1/mark-read", Some(&token), Some(json!({"conversation": "c1", "seq": 1}))),
            200,
            Some("acme"),
        ),
        (
            call("conversation-flags", "POST", "/v1/conversations/c1/pin", Some(&token), Some(json!({"pinned": true}))),
            200,
            Some("acme"),
        ),
        (call("badge", "GET", "/v1/badge", None, None), 401, None),
        (call("touch", "POST", "/v1/touch", Some(ADMIN_TOKEN), Some(json!({}))), 401, None),
        (call("touch", "POST", "/v1/touch", Some(SERVICE_TOKEN), Some(json!({"tenant": "acme"}))), 400, None),
        (call("list", "GET", "/v1/conversations?limit=0", Some(&token), None), 400, Some("acme")),
        (
            call("reconcile", "POST", "/v1/admin/reconcile", Some(ADMIN_TOKEN), Some(json!({"tenant": "beta"}))),
            409,
            Some("beta"),
        ),
        (call("not-found", "DELETE", "/nowhere", None, None), 404, None),
    ];
    let mut expected = Vec::new();
    for (n, (call, status, tenant)) in calls.iter().enumerate() {
        // Every other call brings its own request id; the others get one.
        let given = (n % 2 == 0).then(|| format!("log-test-{n}"));
        let answer = host.call(call, given.as_deref()).await;
        assert_eq!(answer.status, *status, "{call:?}: {:?}", answer.body);
        let id = answer.header("x-request-id").expect("x-request-id").to_string();
        if let Some(given) = &given {
            assert_eq!(&id, given);
        }
        expected.push((call.clone(), *status, tenant.map(str::to_string), id));
    }
    redis.kill();
    let failing = call("badge", "GET", "/v1/badge", Some(&token), None);
    let answer = host.call(&failing, Some("log-test-down")).await;
    assert_eq!((answer.status, answer.body["error"]["request_id"].as_str()), (503, Some("log-test-down")));
    expected.push((failing, 503, Some("acme".to_string()), "log-test-down".to_string()));
    let without_id = call("badge", "GET", "/v1/badge", Some(&token), None);
    let answer = host.call(&without_id, None).await;
    let generated = answer.body["error"]["request_id"].as_str().unwrap().to_string();
    assert_eq!((answer.status, answer.header("x-request-id")), (503, Some(generated.as_str())));
    expected.push((without_id, 503, Some("acme".to_string()), generated.clone()));

    let (_, log) = host.stop();
    let lines = json_lines(&log);
    assert_eq!(lines.len(), expected.len(), "one request id per request: {log}");
    for (call, status, tenant, id) in &expected {
        let found = lines.get(id).unwrap_or_else(|| panic!("no log line for {id} ({call:?}): {log}"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        let line = found[0].as_object().unwrap();
        let mut keys: Vec<&str> = line.keys().map(String::as_str).collect();
        let mut documented = vec!["function", "method", "status", "ms", "request_id"];
        if tenant.is_some() {
            documented.push("tenant");
        }
        keys.sort();
        documented.sort();
        assert_eq!(keys, documented, "{id}: {line:?}");
        assert_eq!(
            (&line["function"], &line["method"], &line["status"], line.get("tenant")),
            (&json!(call.function), &json!(call.method), &json!(status), tenant.as_ref().map(|t| json!(t)).as_ref()),
            "{id}: {line:?}"
        );
        assert!(line["ms"].as_f64().is_some_and(|ms| (0.0..60_000.0).contains(&ms)), "{id}: {line:?}");
    }
    let json_text: String = log.lines().filter(|l| l.starts_with('{')).collect::<Vec<_>>().join("\n");
    assert!(!json_text.contains(user), "a user id in the log lines: {json_text}");
    for secret in [JWT_SECRET, SERVICE_TOKEN, ADMIN_TOKEN, token.as_str()] {
        assert!(!log.contains(secret), "a secret in the log: {log}");
    }
    // Each 5xx: one line with its request id and the reason the answer left out.
    for id in ["log-test-down", generated.as_str()] {
        let reasons: Vec<&str> =
            log.lines().filter(|l| l.starts_with(&format!("unread: error: request_id={id} "))).collect();
        assert_eq!(reasons.len(), 1, "{id}: {log}");
        assert!(
            reasons[0].starts_with(&format!(
                "unread: error: request_id={id} function=badge status=503 code=unavailable: redis: "
            )),
            "{}",
            reasons[0]
        );
    }
}

/// Distinctive secrets for the leak test: none may show anywhere.
const LEAK_JWT_SECRET: &str = "jwtsecret-Kq3Vx8Lm2Np7Rt5Wz9Yb4Hd6Fg1Js0Ac";
const LEAK_SERVICE_TOKEN: &str = "svctoken-Pw4Ud7Ie2Ox9Ma5Ky";
const LEAK_ADMIN_TOKEN: &str = "admtoken-Zr6Tb1Qn8Gc3Lv0Ej";
const LEAK_SQL_PASSWORD: &str = "s3cretpw-Gh5Jk2Wq";
const LEAK_REDIS_PASSWORD: &str = "redispw-Tc8Mv3Xs6Bq1";

/// Every route, called rightly and wrongly: with its own credential, with
/// each other one, with bad credentials and with bad input.
fn every_route(app: &str, stale: &str, forged: &str) -> Vec<Call> {
    let touch = |seq: u64| {
        json!({"tenant": "acme", "conversation": "c1", "seq": seq, "ts": 1_000 + seq, "sender": "u1",
            "members": ["u1", "u2"], "preview": {"text": format!("m{seq}")}, "mentions": ["u2"]})
    };
    let routes: Vec<(&'static str, &'static str, &'static str, &str, Option<Value>)> = vec![
        ("touch", "POST", "/v1/touch", LEAK_SERVICE_TOKEN, Some(touch(1))),
        ("touch", "POST", "/v1/touch", LEAK_SERVICE_TOKEN, Some(touch(2))),
        ("mark-read", "POST", "/v1/mark-read", app, Some(json!({"conversation": "c1", "seq": 1}))),
        ("list", "GET", "/v1/conversations", app, None),
        ("list", "GET", "/v1/conversations?preview=lockscreen&category=chat", app, None),
        ("badge", "GET", "/v1/badge", app, None),
        ("conversation-flags", "POST", "/v1/conversations/c1/mute", app, Some(json!({"muted": true}))),
        ("conversation-flags", "POST", "/v1/conversations/c1/pin", app, Some(json!({"pinned": true}))),
        ("conversation-flags", "POST", "/v1/conversations/c1/mark-unread", app, Some(json!({}))),
        (
            "recall",
            "POST",
            "/v1/recall",
            LEAK_SERVICE_TOKEN,
            Some(json!({"tenant": "acme", "conversation": "c1", "seq": 2, "members": ["u2"]})),
        ),
        (
            "join",
            "POST",
            "/v1/join",
            LEAK_SERVICE_TOKEN,
            Some(json!({"tenant": "acme", "conversation": "c1", "seq": 2, "members": ["u3"]})),
        ),
        (
            "leave",
            "POST",
            "/v1/leave",
            LEAK_SERVICE_TOKEN,
            Some(json!({"tenant": "acme", "conversation": "c1", "members": ["u3"]})),
        ),
        (
            "reconcile",
            "POST",
            "/v1/admin/reconcile",
            LEAK_ADMIN_TOKEN,
            Some(json!({"tenant": "acme", "users": ["u2"]})),
        ),
        ("reconcile", "POST", "/v1/admin/reconcile", LEAK_ADMIN_TOKEN, Some(json!({"tenant": "acme"}))),
        (
            "clear-category",
            "POST",
            "/v1/admin/clear-category",
            LEAK_ADMIN_TOKEN,
            Some(json!({"tenant": "acme", "category": "chat", "user": "u2", "dry_run": true})),
        ),
        (
            "delete-conversation",
            "POST",
            "/v1/admin/conversations/c9/delete",
            LEAK_ADMIN_TOKEN,
            Some(json!({"tenant": "acme", "members": ["u2"]})),
        ),
        ("not-found", "GET", "/v1/secrets", app, None),
    ];
    let mut calls = Vec::new();
    for (function, method, path, own, body) in routes {
        calls.push(call(function, method, path, Some(own), body.clone()));
        for other in [app, LEAK_SERVICE_TOKEN, LEAK_ADMIN_TOKEN, stale, forged, LEAK_JWT_SECRET] {
            if other != own {
                calls.push(call(function, method, path, Some(other), body.clone()));
            }
        }
        // Bad input: a query a GET does not know, a body a POST does not take; the wrong method.
        if method == "GET" {
            let query = format!("{path}{}x=1", if path.contains('?') { '&' } else { '?' });
            calls.push(call(function, method, &query, Some(own), None));
        } else {
            calls.push(call(function, method, path, Some(own), Some(json!({"tenant": "acme", "unknown": [1]}))));
        }
        calls.push(call(function, if method == "GET" { "POST" } else { "GET" }, path, Some(own), None));
    }
    calls
}

#[tokio::test]
async fn no_secret_reaches_an_answer_or_the_log_whatever_fails() {
    let store = MessageStore::create(Kind::Postgres).await;
    let members = ["u1".to_string(), "u2".to_string()];
    store.create_conversation("acme", "c1", "chat", &members).await;
    store.store_message("acme", "c1", 1, 1_001, "u1", "{\"text\":\"m1\"}").await;
    store.store_message("acme", "c1", 2, 1_002, "u1", "{\"text\":\"m2\"}").await;
    // The local PostgreSQL trusts local connections: the password is sent and ignored.
    let sql_url = store.url.replacen("postgres@", &format!("postgres:{LEAK_SQL_PASSWORD}@"), 1);
    assert!(sql_url.contains(LEAK_SQL_PASSWORD));
    let redis = RedisServer::with_password(LEAK_REDIS_PASSWORD);
    assert!(redis.url().contains(LEAK_REDIS_PASSWORD));
    let host = Served::start(&[
        ("redis_url", redis.url()),
        ("redis_host", redis.host()),
        ("jwt_secret", LEAK_JWT_SECRET.to_string()),
        ("service_token", LEAK_SERVICE_TOKEN.to_string()),
        ("admin_token", LEAK_ADMIN_TOKEN.to_string()),
        ("sql_url", sql_url.clone()),
        ("sql_host", "postgres://127.0.0.1:5432".to_string()),
    ])
    .await;
    let app = app_token("acme", "u2", LEAK_JWT_SECRET, now() + 3600);
    let stale = app_token("acme", "u2", LEAK_JWT_SECRET, now() - 3600);
    let forged = app_token("acme", "u2", "an-attacker-s-own-secret-of-32-bytes!!", now() + 3600);
    let calls = every_route(&app, &stale, &forged);

    let mut answers: Vec<(String, Call, Answer)> = Vec::new();
    let run = |phase: &'static str| {
        let (host, calls) = (&host, &calls);
        async move {
            let mut out = Vec::new();
            for (n, call) in calls.iter().enumerate() {
                let id = format!("{phase}-{n}");
                out.push((id.clone(), call.clone(), host.call(call, Some(&id)).await));
            }
            out
        }
    };
    answers.extend(run("all-up").await);
    assert!(answers.iter().all(|(_, _, a)| a.status < 500), "all up: no 5xx");
    redis.kill();
    answers.extend(run("redis-down").await);
    store.drop_database().await;
    answers.extend(run("both-down").await);
    redis.restart();
    answers.extend(run("sql-down").await);
    let (stdout, log) = host.stop();

    let secrets = [
        ("jwt_secret", LEAK_JWT_SECRET),
        ("service_token", LEAK_SERVICE_TOKEN),
        ("admin_token", LEAK_ADMIN_TOKEN),
        ("the SQL password", LEAK_SQL_PASSWORD),
        ("the sql_url", sql_url.as_str()),
        ("the Redis password", LEAK_REDIS_PASSWORD),
        ("an app token", app.as_str()),
        ("an app token's signature", app.rsplit_once('.').unwrap().1),
        ("a stale token", stale.as_str()),
        ("a forged token", forged.as_str()),
    ];
    let mut five_hundreds = 0;
    for (id, call, answer) in &answers {
        let what = format!("{id} {} {} -> {}", call.method, call.path, answer.status);
        for (name, secret) in secrets {
            assert!(!answer.text.contains(secret), "{what}: {name} in the body: {}", answer.text);
            for (header, value) in &answer.headers {
                assert!(!header.contains(secret) && !value.contains(secret), "{what}: {name} in header {header}");
            }
        }
        assert_eq!(answer.header("x-request-id"), Some(id.as_str()), "{what}");
        assert_eq!(answer.content_length, Some(answer.length), "{what}: Content-Length");
        if answer.status >= 400 {
            let error = answer.body["error"].as_object().unwrap_or_else(|| panic!("{what}: {}", answer.text));
            assert_eq!(error["request_id"], json!(id), "{what}");
            let message = error["message"].as_str().unwrap().to_ascii_lowercase();
            for internal in
                ["redis", "sql:", "postgres", "lua", "evalsha", "noscript", "127.0.0.1", "os error", "db error"]
            {
                assert!(!message.contains(internal), "{what}: {internal:?} in {message:?}");
            }
        }
        if answer.status >= 500 {
            five_hundreds += 1;
            let error = answer.body["error"].as_object().unwrap();
            assert_eq!(error.len(), 3, "{what}: code, message and request_id only: {error:?}");
            assert!(matches!(error["code"].as_str(), Some("unavailable" | "misconfigured")), "{what}");
            let prefix = format!("unread: error: request_id={id} function={} status={}", call.function, answer.status);
            assert_eq!(log.lines().filter(|l| l.starts_with(&prefix)).count(), 1, "{what}: no reason logged");
        }
    }
    assert!(five_hundreds >= 20, "the failures were exercised: {five_hundreds} 5xx");
    for (name, secret) in secrets {
        assert!(!log.contains(secret), "{name} in the host's stderr");
        assert!(!stdout.contains(secret), "{name} in the host's stdout");
    }
    // One JSON line per request, none naming a user.
    let lines = json_lines(&log);
    for (id, _, _) in &answers {
        assert_eq!(lines.get(id).map(Vec::len), Some(1), "{id}");
    }
    for line in lines.values().flatten() {
        assert!(!line.to_string().contains("u2"), "a user id in {line}");
    }
}

#[tokio::test]
async fn unread_host_up_refuses_a_jwt_secret_shorter_than_32_bytes() {
    let short = "short-but-secret-Xy81";
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = [("service_token", SERVICE_TOKEN.to_string()), ("admin_token", ADMIN_TOKEN.to_string())];
    // From the environment, and from --variable (which wins over it).
    let from_env = host_command(port, &[base[0].clone(), base[1].clone(), ("jwt_secret", short.to_string())]);
    let mut from_flag = host_command(port, &[base[0].clone(), base[1].clone(), ("jwt_secret", JWT_SECRET.to_string())]);
    from_flag.args(["--variable", &format!("jwt_secret={short}")]);
    for (what, mut command) in [("SPIN_VARIABLE_JWT_SECRET", from_env), ("--variable", from_flag)] {
        let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{what}: started with a short secret");
        assert!(stderr.contains("jwt_secret") && stderr.contains("32"), "{what}: {stderr}");
        assert!(
            !stderr.contains(short) && !String::from_utf8_lossy(&output.stdout).contains(short),
            "{what}: {stderr}"
        );
        assert!(!String::from_utf8_lossy(&output.stdout).contains("Serving"), "{what}");
    }
}

/// `unread-host up --component-id touch -c health`, as a deployment of one
/// function runs it: those routes answer, the others are Spin's plain 404,
/// and the routes printed are theirs alone. An id spin.toml does not have
/// stops the start, as in Spin.
#[tokio::test]
async fn unread_host_up_serves_only_the_selected_components() {
    let redis = RedisServer::start();
    let variables = essentials(&redis);
    let host = Served::start_with(&variables, &["--component-id", "touch", "-c", "health"]).await;
    let touch = json!({"tenant": "acme", "conversation": "c1", "seq": 1, "ts": 1_000, "sender": "u1",
        "members": ["u1", "u2"], "preview": {"text": "hi"}});
    let touched = host.call(&call("touch", "POST", "/v1/touch", Some(SERVICE_TOKEN), Some(touch)), None).await;
    assert_eq!((touched.status, &touched.body), (200, &json!({"applied": true})));
    let health = host.call(&call("health", "GET", "/v1/health", None, None), None).await;
    assert_eq!((health.status, health.body["status"].as_str()), (200, Some("ok")));
    let token = app_token("acme", "u2", JWT_SECRET, now() + 3600);
    for path in ["/v1/badge", "/v1/conversations", "/nowhere"] {
        let answer = host.call(&call("none", "GET", path, Some(&token), None), None).await;
        assert_eq!((answer.status, answer.length, answer.header("x-request-id")), (404, 0, None), "{path}");
    }
    let (stdout, _) = host.stop();
    let routes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  ")).map(str::trim).collect();
    assert_eq!(routes.len(), 2, "{stdout}");
    assert!(routes[0].starts_with("touch: ") && routes[1].starts_with("health: "), "{stdout}");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut unknown = host_command(port, &variables);
    unknown.args(["--component-id", "touch", "--component-id", "nope"]);
    let output = tokio::task::spawn_blocking(move || unknown.output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started with an unknown component");
    assert!(stderr.contains("Specified component \"nope\" not found in application"), "{stderr}");
}

/// `unread-host up --quiet`, as `spin up --quiet`: the components' output
/// goes nowhere (no access line, no reason for a 5xx), and the calls are
/// answered as without it.
#[tokio::test]
async fn unread_host_up_quiet_drops_what_the_components_write() {
    let redis = RedisServer::start();
    let host = Served::start_with(&essentials(&redis), &["--quiet"]).await;
    let touch = json!({"tenant": "acme", "conversation": "c1", "seq": 1, "ts": 1_000, "sender": "u1",
        "members": ["u1", "u2"], "preview": {"text": "hi"}});
    let touched = host.call(&call("touch", "POST", "/v1/touch", Some(SERVICE_TOKEN), Some(touch)), Some("q1")).await;
    assert_eq!((touched.status, &touched.body), (200, &json!({"applied": true})));
    let token = app_token("acme", "u2", JWT_SECRET, now() + 3600);
    let badge = host.call(&call("badge", "GET", "/v1/badge", Some(&token), None), Some("q2")).await;
    assert_eq!((badge.status, badge.body["total"].as_u64()), (200, Some(1)), "{:?}", badge.body);
    let (stdout, stderr) = host.stop();
    assert!(stdout.contains("Serving"), "{stdout}");
    for id in ["q1", "q2"] {
        assert!(!stdout.contains(id) && !stderr.contains(id), "{id} logged:\n{stdout}\n{stderr}");
    }

    // Without it, the same calls are logged (what the check above would miss).
    let host = Served::start(&essentials(&redis)).await;
    let badge = host.call(&call("badge", "GET", "/v1/badge", Some(&token), None), Some("q3")).await;
    assert_eq!(badge.status, 200);
    let (_, stderr) = host.stop();
    assert!(stderr.contains("\"request_id\":\"q3\""), "{stderr}");
}

/// `unread-host up --help` says how to use it, on stdout, and succeeds; a
/// wrong option fails with the usage on stderr.
#[test]
fn the_host_says_how_to_use_it() {
    let help = Command::new(host_binary()).args(["up", "--help"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{}", String::from_utf8_lossy(&help.stderr));
    for option in ["--listen", "--variable", "--component-id", "--per-request", "--tcp-nodelay", "--quiet"] {
        assert!(stdout.contains(option), "{option} missing from {stdout}");
    }
    let wrong = Command::new(host_binary()).args(["up", "--nope"]).output().unwrap();
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("usage: unread-host up"));
}
