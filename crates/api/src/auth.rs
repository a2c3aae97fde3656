//! Who is calling: app users by a JWT, either the app's own (HS256 with
//! `jwt_secret`) or its identity provider's (RS256, ES256, EdDSA with keys
//! from `jwks_url` or `jwt_public_keys`); the app's backend by one of two
//! shared tokens: `service_token` for the message store's calls (touch,
//! recall, join, leave) and `admin_token` for the operator's (reconcile,
//! delete-conversation, clear-category). A token works on its own routes
//! only. No refusal repeats a token, a claim's value or the configuration.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use spin_sdk::http::Request;
use subtle::ConstantTimeEq;

use crate::config::{optional_variable, variable};
use crate::core::Principal;
use crate::jwks::{self, Want};
use crate::jwt::{ClaimRules, Key, TenantSource, Token};
use crate::{Identifier, Problem};

/// HS256 keys shorter than the hash's output (32 bytes) are refused as
/// weak (RFC 7518, section 3.2).
const MIN_JWT_SECRET_BYTES: usize = 32;

/// Clock skew allowed on `exp` and `nbf` unless `jwt_leeway_seconds` says otherwise.
const DEFAULT_LEEWAY_SECONDS: u32 = 30;

/// The largest `jwt_leeway_seconds` accepted: more would keep expired
/// tokens working for long.
const MAX_LEEWAY_SECONDS: u32 = 300;

/// The tenant and user of an app call, from its `Authorization: Bearer <JWT>`.
pub async fn app_principal(request: &Request) -> Result<Principal, Problem> {
    let config = JwtConfig::read().await?;
    let text = bearer(request)?;
    let token = Token::parse(text).map_err(Problem::unauthorized)?;
    let digest: [u8; 32] = Sha256::digest(text.as_bytes()).into();
    if !VERIFIED.with_borrow(|verified| verified.holds(&digest)) {
        if !config.verified(&token).await? {
            return Err(Problem::unauthorized("the token's signature is not valid"));
        }
        VERIFIED.with_borrow_mut(|verified| verified.add(digest));
    }
    let who = config.claims.principal(&token, now_seconds()).map_err(Problem::unauthorized)?;
    crate::serve::note_tenant(&who.tenant);
    Ok(who)
}

/// Accepts a call of the message store: its bearer token is `service_token`.
pub async fn service_call(request: &Request) -> Result<(), Problem> {
    shared_token_call(request, "service_token").await
}

/// Accepts an operator's call: its bearer token is `admin_token`.
pub async fn admin_call(request: &Request) -> Result<(), Problem> {
    shared_token_call(request, "admin_token").await
}

async fn shared_token_call(request: &Request, name: &str) -> Result<(), Problem> {
    let expected = variable(name).await?;
    if expected.is_empty() {
        return Err(Problem::misconfigured(format!("variable {name} is empty")));
    }
    let token = bearer(request)?;
    if same_secret(token, &expected) {
        Ok(())
    } else {
        Err(Problem::unauthorized("the bearer token is not valid for this route"))
    }
}

/// Compares in constant time, and compares digests so that not even the
/// length of the expected token shows in the time taken.
fn same_secret(given: &str, expected: &str) -> bool {
    bool::from(Sha256::digest(given.as_bytes()).ct_eq(&Sha256::digest(expected.as_bytes())))
}

fn bearer(request: &Request) -> Result<&str, Problem> {
    let value = request
        .headers()
        .get("authorization")
        .ok_or_else(|| Problem::unauthorized("an Authorization: Bearer header is required"))?;
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Problem::unauthorized("the Authorization header must be `Bearer <token>`"))
}

fn now_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Where app tokens' keys come from, and what their claims must satisfy.
struct JwtConfig {
    /// `jwt_secret` and the `jwt_public_keys`.
    keys: Rc<Vec<Key>>,
    /// `jwks_url`, when set.
    jwks_url: Option<String>,
    claims: ClaimRules,
}

impl JwtConfig {
    async fn read() -> Result<JwtConfig, Problem> {
        let set = |value: Option<String>| value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        // The secret is used byte for byte, as given.
        let secret = optional_variable("jwt_secret").await?.filter(|v| !v.is_empty());
        let pem = set(optional_variable("jwt_public_keys").await?);
        let jwks_url = set(optional_variable("jwks_url").await?);
        if secret.is_none() && pem.is_none() && jwks_url.is_none() {
            return Err(Problem::misconfigured(
                "no key verifies app tokens: set jwt_secret, jwt_public_keys or jwks_url",
            ));
        }
        if let Some(secret) = &secret
            && secret.len() < MIN_JWT_SECRET_BYTES
        {
            return Err(Problem::misconfigured(format!(
                "variable jwt_secret is {} bytes; at least {MIN_JWT_SECRET_BYTES} are needed",
                secret.len()
            )));
        }
        let keys = static_keys(secret.as_deref(), pem.as_deref())?;
        let tenant = match set(optional_variable("fixed_tenant").await?) {
            Some(tenant) => TenantSource::Fixed(
                Identifier::parse("fixed_tenant", &tenant)
                    .map_err(|why| Problem::misconfigured(format!("variable {why}")))?
                    .into_string(),
            ),
            None => TenantSource::Claim(set(optional_variable("tenant_claim").await?).unwrap_or_else(|| "tid".into())),
        };
        let claims = ClaimRules {
            issuer: set(optional_variable("jwt_issuer").await?),
            audience: set(optional_variable("jwt_audience").await?),
            leeway: f64::from(leeway(optional_variable("jwt_leeway_seconds").await?)?),
            user_claim: set(optional_variable("user_claim").await?).unwrap_or_else(|| "sub".into()),
            tenant,
        };
        Ok(JwtConfig { keys, jwks_url, claims })
    }

    /// Whether a configured key signed `token`. A `kid` the JWKS held does
    /// not name sends for the provider's newer keys once.
    async fn verified(&self, token: &Token<'_>) -> Result<bool, Problem> {
        let signed_by = |keys: &[Key]| keys.iter().any(|key| key.fits(token) && key.verifies(token));
        if signed_by(&self.keys) {
            return Ok(true);
        }
        let Some(url) = &self.jwks_url else { return Ok(false) };
        let held = jwks::keys(url, Want::Current).await?;
        if signed_by(&held) {
            return Ok(true);
        }
        if !Key::unknown_to(&held, token) {
            return Ok(false);
        }
        Ok(signed_by(&jwks::keys(url, Want::Newer).await?))
    }
}

/// How long a token whose signature was verified is taken as verified by
/// the instance: a client sends the same token for many calls, and an RS256
/// or ES256 check costs over a millisecond in wasm (the benchmark's "app
/// tokens"). Its claims (`exp` above all) are checked on every call.
const VERIFIED_FOR: Duration = Duration::from_secs(60);

/// The most tokens an instance remembers as verified.
const MAX_VERIFIED: usize = 1024;

/// Tokens (by the SHA-256 of their whole text) whose signature a key
/// verified, and when.
#[derive(Default)]
struct Verified {
    at: HashMap<[u8; 32], Instant>,
}

impl Verified {
    fn holds(&self, digest: &[u8; 32]) -> bool {
        self.at.get(digest).is_some_and(|at| at.elapsed() < VERIFIED_FOR)
    }

    fn add(&mut self, digest: [u8; 32]) {
        if self.at.len() >= MAX_VERIFIED {
            self.at.retain(|_, at| at.elapsed() < VERIFIED_FOR);
            if self.at.len() >= MAX_VERIFIED {
                self.at.clear();
            }
        }
        self.at.insert(digest, Instant::now());
    }
}

/// Keys parsed from the variables that gave them.
struct Parsed {
    secret: Option<String>,
    pem: Option<String>,
    keys: Rc<Vec<Key>>,
}

thread_local! {
    /// The keys parsed from the last `jwt_secret` and `jwt_public_keys` seen:
    /// parsing an RSA key on every call would cost more than verifying.
    static PARSED: RefCell<Option<Parsed>> = const { RefCell::new(None) };
    /// The tokens this instance verified lately.
    static VERIFIED: RefCell<Verified> = RefCell::new(Verified::default());
}

fn static_keys(secret: Option<&str>, pem: Option<&str>) -> Result<Rc<Vec<Key>>, Problem> {
    let held = PARSED.with_borrow(|parsed| {
        parsed.as_ref().filter(|p| p.secret.as_deref() == secret && p.pem.as_deref() == pem).map(|p| p.keys.clone())
    });
    if let Some(keys) = held {
        return Ok(keys);
    }
    let mut keys: Vec<Key> = secret.map(|s| Key::hmac(s.as_bytes())).into_iter().collect();
    if let Some(pem) = pem {
        let parsed =
            Key::from_pem(pem).map_err(|why| Problem::misconfigured(format!("variable jwt_public_keys: {why}")));
        keys.extend(parsed?);
    }
    let keys = Rc::new(keys);
    let parsed = Parsed { secret: secret.map(str::to_string), pem: pem.map(str::to_string), keys: keys.clone() };
    PARSED.with_borrow_mut(|held| *held = Some(parsed));
    Ok(keys)
}

/// `jwt_leeway_seconds`: undeclared or empty is the default; anything but a
/// whole number up to the maximum is misconfigured.
fn leeway(text: Option<String>) -> Result<u32, Problem> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(DEFAULT_LEEWAY_SECONDS);
    };
    match text.trim().parse::<u32>() {
        Ok(seconds) if seconds <= MAX_LEEWAY_SECONDS => Ok(seconds),
        _ => Err(Problem::misconfigured(format!(
            "variable jwt_leeway_seconds must be a whole number of seconds, 0-{MAX_LEEWAY_SECONDS}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leeway_variable_is_a_small_whole_number() {
        assert_eq!(leeway(None).unwrap(), 30);
        assert_eq!(leeway(Some(" ".into())).unwrap(), 30);
        assert_eq!(leeway(Some("0".into())).unwrap(), 0);
        assert_eq!(leeway(Some("300".into())).unwrap(), 300);
        for bad in ["301", "-1", "1.5", "30s"] {
            assert_eq!(leeway(Some(bad.into())).unwrap_err().code, "misconfigured", "{bad}");
        }
    }

    #[test]
    fn shared_tokens_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "abc"));
        assert!(!same_secret("abd", "abc"));
    }

    #[test]
    fn verified_tokens_are_remembered_for_a_while_and_bounded() {
        let mut verified = Verified::default();
        verified.add([1; 32]);
        assert!(verified.holds(&[1; 32]) && !verified.holds(&[2; 32]));
        verified.at.insert([2; 32], Instant::now() - VERIFIED_FOR);
        assert!(!verified.holds(&[2; 32]), "too old");
        for n in 0..MAX_VERIFIED * 2 {
            let mut digest = [0; 32];
            digest[..8].copy_from_slice(&(n as u64).to_le_bytes());
            verified.add(digest);
            assert!(verified.at.len() <= MAX_VERIFIED);
        }
    }

    #[test]
    fn parsed_keys_follow_the_variables() {
        let a = static_keys(Some("0123456789abcdef0123456789abcdef"), None).unwrap();
        assert!(Rc::ptr_eq(&a, &static_keys(Some("0123456789abcdef0123456789abcdef"), None).unwrap()));
        let b = static_keys(Some("fedcba9876543210fedcba9876543210"), None).unwrap();
        assert!(!Rc::ptr_eq(&a, &b), "a new secret is parsed anew");
        let bad = static_keys(None, Some("not a key")).unwrap_err();
        assert_eq!(bad.code, "misconfigured");
    }
}
