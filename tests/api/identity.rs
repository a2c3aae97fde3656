//! Tokens from the app's own identity provider: RS256, ES256 and EdDSA keys
//! published as a JWKS (served here on loopback, rotated mid-test) or given
//! as PEM; the user and tenant in claims the app names, or one fixed tenant;
//! user ids as real providers issue them (emails, `auth0|…`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{App, SERVICE_TOKEN, Setup, Silent, assert_refused, message, signed_jwt};
use crate::tokens::SigningKey;

const ISSUER: &str = "https://id.example";
const AUDIENCE: &str = "unread";
/// A namespaced claim, as Auth0 and others require for custom claims.
const ORG_CLAIM: &str = "https://chat.example/org";

fn in_an_hour() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600
}

/// What the provider puts in an access token for `email` of `org`.
fn provider_claims(email: &str, org: &str) -> Value {
    json!({"iss": ISSUER, "aud": [AUDIENCE, "other-api"], "sub": "auth0|64f1c2", "email": email,
           ORG_CLAIM: org, "exp": in_an_hour()})
}

/// A JWKS endpoint on loopback whose keys the test replaces, counting fetches.
struct JwksServer {
    port: u16,
    document: Arc<Mutex<(u16, String)>>,
    fetches: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(keys: &[&SigningKey]) -> JwksServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let document = Arc::new(Mutex::new((200, String::new())));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (shared, count) = (document.clone(), fetches.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let (shared, count) = (shared.clone(), count.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let (status, body) = shared.lock().unwrap().clone();
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        let server = JwksServer { port, document, fetches, task };
        server.publish(keys);
        server
    }

    /// Serves exactly `keys` from now on.
    fn publish(&self, keys: &[&SigningKey]) {
        let jwks = json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
        *self.document.lock().unwrap() = (200, jwks.to_string());
    }

    fn answer_with(&self, status: u16) {
        self.document.lock().unwrap().0 = status;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/.well-known/jwks.json", self.port)
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The app configured for the provider: JWKS at `url` (allowed through
/// `origin`), no shared secret, the user in `email`, the tenant in the
/// namespaced org claim, issuer and audience checked.
async fn app_for_provider(url: String, origin: String) -> App {
    App::with(Setup {
        variables: vec![
            ("jwt_secret", String::new()),
            ("jwks_url", url),
            ("jwks_host", origin),
            ("user_claim", "email".into()),
            ("tenant_claim", ORG_CLAIM.into()),
            ("jwt_issuer", ISSUER.into()),
            ("jwt_audience", AUDIENCE.into()),
        ],
        ..Setup::default()
    })
    .await
}

async fn get(app: &App, path: &str, token: &str) -> crate::support::Answer {
    app.send("GET", path, Some(token.to_string()), None).await
}

#[tokio::test]
async fn jwks_tokens_of_every_algorithm_work_and_keys_rotate() {
    let (rs, es, ed) = (SigningKey::rs256("rs-1"), SigningKey::es256("es-1"), SigningKey::ed25519("ed-1"));
    let jwks = JwksServer::start(&[&rs, &es, &ed]).await;
    let app = app_for_provider(jwks.url(), jwks.origin()).await;
    let touch =
        message("acme-corp", "#general", 1, 1_000, "bob@example.com", &["alice@example.com", "bob@example.com"]);
    assert_eq!(app.touch(touch).await.status, 200);

    let alice = provider_claims("alice@example.com", "acme-corp");
    for key in [&rs, &es, &ed] {
        let list = get(&app, "/v1/conversations", &key.token(&alice)).await;
        assert_eq!(list.status, 200, "{}: {:?}", key.alg, list.body);
        let row = &list.body["conversations"][0];
        assert_eq!((&row["id"], &row["unread"]), (&json!("#general"), &json!(1)), "{}", key.alg);
        assert_eq!(list.body["badge"]["total"], 1, "{}", key.alg);
    }
    // The sender counts nothing, and another org's alice sees nothing of acme-corp.
    let bob = get(&app, "/v1/badge", &ed.token(&provider_claims("bob@example.com", "acme-corp"))).await;
    assert_eq!(bob.body["total"], 0, "{:?}", bob.body);
    let elsewhere = get(&app, "/v1/badge", &rs.token(&provider_claims("alice@example.com", "other-org"))).await;
    assert_eq!((elsewhere.status, &elsewhere.body["total"]), (200, &json!(0)), "{:?}", elsewhere.body);
    let read = app
        .send(
            "POST",
            "/v1/mark-read",
            Some(es.token(&alice)),
            Some(json!({"conversation": "#general", "seq": 1}).to_string()),
        )
        .await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(0)), "{:?}", read.body);

    // Refused: a key the JWKS does not hold under a kid it does; an HS256
    // token (no secret is configured); the provider's claims on another
    // issuer or audience; a token without the configured user claim.
    let impostor = SigningKey::es256("es-1");
    let mut no_email = alice.clone();
    no_email.as_object_mut().unwrap().remove("email");
    let mut wrong_audience = alice.clone();
    wrong_audience["aud"] = json!("someone-else");
    for (why, token) in [
        ("an impostor's key", impostor.token(&alice)),
        ("HS256 with an empty secret", signed_jwt(r#"{"alg":"HS256"}"#, &alice, "")),
        ("HS256 keyed by the RSA JWK", signed_jwt(r#"{"alg":"HS256","kid":"rs-1"}"#, &alice, &rs.jwk.to_string())),
        ("another audience", rs.token(&wrong_audience)),
        ("no email claim", rs.token(&no_email)),
    ] {
        assert_refused(&get(&app, "/v1/badge", &token).await, 401, "unauthorized", why);
    }

    // Rotation: the provider publishes a new RSA key and retires the old one.
    let rs2 = SigningKey::rs256("rs-2");
    jwks.publish(&[&rs2, &es, &ed]);
    let before = jwks.fetches();
    let fresh = get(&app, "/v1/badge", &rs2.token(&alice)).await;
    assert_eq!((fresh.status, &fresh.body["total"]), (200, &json!(0)), "the new key works at once: {:?}", fresh.body);
    assert_eq!(jwks.fetches(), before + 1, "an unknown kid fetches the JWKS once");
    // A new token of the retired key is refused (one the instance verified
    // before stays verified for up to a minute: retiring is not revoking).
    let mut later = alice.clone();
    later["iat"] = json!(in_an_hour() - 3000);
    let retired = get(&app, "/v1/badge", &rs.token(&later)).await;
    assert_refused(&retired, 401, "unauthorized", "the retired key");
    assert_eq!(get(&app, "/v1/badge", &es.token(&alice)).await.status, 200, "the keys kept still work");

    // Made-up kids cannot turn calls into fetches.
    let before = jwks.fetches();
    for n in 0..20 {
        let forged = SigningKey::ed25519("x").renamed(&format!("made-up-{n}"));
        assert_refused(&get(&app, "/v1/badge", &forged.token(&alice)).await, 401, "unauthorized", "made-up kid");
    }
    assert!(jwks.fetches() <= before + 1, "{} fetches for 20 made-up kids", jwks.fetches() - before);
}

#[tokio::test]
async fn pem_keys_and_a_fixed_tenant_serve_a_single_tenant_app() {
    let (ed, es) = (SigningKey::ed25519("unused"), SigningKey::es256("unused"));
    let pem = [ed.pem.as_str(), es.pem.as_str()].concat();
    let app = App::with(Setup {
        variables: vec![
            ("jwt_secret", String::new()),
            ("jwt_public_keys", pem),
            ("fixed_tenant", "solo".into()),
            ("jwt_leeway_seconds", "0".into()),
        ],
        ..Setup::default()
    })
    .await;
    let touch = message("solo", "c1", 1, 1_000, "u9", &["u9", "auth0|64f1c2"]);
    assert_eq!(app.touch(touch).await.status, 200);
    // No tenant claim at all, or one naming another tenant: the tenant is solo.
    for claims in [
        json!({"sub": "auth0|64f1c2", "exp": in_an_hour()}),
        json!({"sub": "auth0|64f1c2", "tid": "acme", "exp": in_an_hour()}),
    ] {
        for key in [&ed, &es] {
            let badge = get(&app, "/v1/badge", &key.token(&claims)).await;
            assert_eq!((badge.status, &badge.body["total"]), (200, &json!(1)), "{}: {:?}", key.alg, badge.body);
        }
    }
    // A token verified once is still checked for expiry on every call.
    let soon = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 2;
    let brief = ed.token(&json!({"sub": "auth0|64f1c2", "exp": soon}));
    assert_eq!(get(&app, "/v1/badge", &brief).await.status, 200);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_refused(&get(&app, "/v1/badge", &brief).await, 401, "unauthorized", "expired after it was verified");
    let stranger = SigningKey::ed25519("unused");
    let refused = get(&app, "/v1/badge", &stranger.token(&json!({"sub": "auth0|64f1c2", "exp": in_an_hour()}))).await;
    assert_refused(&refused, 401, "unauthorized", "a key not configured");
}

#[tokio::test]
async fn an_unreachable_or_unallowed_jwks_is_a_clean_503_and_recovers() {
    let key = SigningKey::rs256("k");
    let token = key.token(&provider_claims("alice@example.com", "acme-corp"));

    // The JWKS host is not in allowed_outbound_hosts: the host refuses the
    // request, as Spin does, and the answer says the service is misconfigured.
    let jwks = JwksServer::start(&[&key]).await;
    let app = app_for_provider(jwks.url(), String::new()).await;
    let denied = get(&app, "/v1/badge", &token).await;
    assert_refused(&denied, 503, "misconfigured", "JWKS host not allowed");
    assert_eq!(jwks.fetches(), 0, "the request never left the host");
    drop(app);

    // Nothing listens (a port just released; never bound again here, so no
    // other test's server is disturbed): 503 unavailable, nothing internal in it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/.well-known/jwks.json");
    let down_app = app_for_provider(url, format!("http://127.0.0.1:{port}")).await;
    let down = get(&down_app, "/v1/badge", &token).await;
    assert_refused(&down, 503, "unavailable", "JWKS down");
    assert!(!down.text.contains("127.0.0.1") && !down.text.contains("jwks"), "{}", down.text);
    drop(down_app);

    // A provider that accepts the connection and never answers: the fetch
    // gives up (it is bounded in time) and the call is a clean 503.
    let silent = Silent::start().await;
    let hung = app_for_provider(
        format!("http://127.0.0.1:{}/jwks.json", silent.port),
        format!("http://127.0.0.1:{}", silent.port),
    )
    .await;
    assert_refused(&get(&hung, "/v1/badge", &token).await, 503, "unavailable", "JWKS never answering");

    // A provider failing, then serving again: the next calls work.
    let jwks = JwksServer::start(&[&key]).await;
    let app = app_for_provider(jwks.url(), jwks.origin()).await;
    jwks.answer_with(500);
    assert_refused(&get(&app, "/v1/badge", &token).await, 503, "unavailable", "JWKS answering 500");
    jwks.answer_with(200);
    let up = get(&app, "/v1/badge", &token).await;
    assert_eq!((up.status, &up.body["total"]), (200, &json!(0)), "{:?}", up.body);
    assert_eq!(
        app.send("POST", "/v1/touch", Some(SERVICE_TOKEN.into()), None).await.status,
        400,
        "service calls unaffected"
    );
}
