//! Who is calling: app users by JWT (HS256, `jwt_secret`); the app's backend
//! by one of two shared tokens: `service_token` for the message store's
//! calls (touch, recall, join, leave) and `admin_token` for the operator's
//! (reconcile, delete-conversation, clear-category). A token works on its own
//! routes only. No refusal repeats a token, a claim's value or the
//! configuration.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use spin_sdk::http::Request;
use subtle::ConstantTimeEq;

use crate::config::{optional_variable, variable};
use crate::core::Principal;
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
    let rules = JwtRules::read().await?;
    let token = bearer(request)?;
    let who = rules.verify(token, now_seconds()).map_err(Problem::unauthorized)?;
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

/// What an app token must satisfy, from the component's variables.
struct JwtRules {
    secret: Vec<u8>,
    /// `jwt_issuer`: when set, `iss` must equal it.
    issuer: Option<String>,
    /// `jwt_audience`: when set, `aud` (a string or a list) must contain it.
    audience: Option<String>,
    /// `jwt_leeway_seconds`: clock skew allowed on `exp` and `nbf`.
    leeway: f64,
}

impl JwtRules {
    async fn read() -> Result<JwtRules, Problem> {
        let secret = variable("jwt_secret").await?;
        if secret.len() < MIN_JWT_SECRET_BYTES {
            return Err(Problem::misconfigured(format!(
                "variable jwt_secret is {} bytes; at least {MIN_JWT_SECRET_BYTES} are needed",
                secret.len()
            )));
        }
        let set = |value: Option<String>| value.filter(|v| !v.is_empty());
        let issuer = set(optional_variable("jwt_issuer").await?);
        let audience = set(optional_variable("jwt_audience").await?);
        let leeway = leeway(optional_variable("jwt_leeway_seconds").await?)?;
        Ok(JwtRules { secret: secret.into_bytes(), issuer, audience, leeway: f64::from(leeway) })
    }

    /// Verifies an HS256 JWT and returns its tenant (`tid`) and user (`sub`).
    fn verify(&self, token: &str, now: f64) -> Result<Principal, &'static str> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("the token is not a JWT");
        };
        let header = decode_object(header).ok_or("the token's header is not base64url JSON")?;
        if header.get("alg").and_then(Value::as_str) != Some("HS256") {
            return Err("the token's alg must be HS256");
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| "the token's signature is not base64url")?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).map_err(|_| "the token cannot be checked")?;
        mac.update(&token.as_bytes()[..token.rfind('.').unwrap_or(0)]);
        mac.verify_slice(&signature).map_err(|_| "the token's signature is not valid")?;
        let claims = decode_object(payload).ok_or("the token's claims are not base64url JSON")?;
        self.check_claims(&claims, now)
    }

    fn check_claims(&self, claims: &Map<String, Value>, now: f64) -> Result<Principal, &'static str> {
        let exp = claims.get("exp").ok_or("the token has no exp claim")?;
        let exp = exp.as_f64().ok_or("the token's exp claim must be a number")?;
        if exp + self.leeway <= now {
            return Err("the token has expired");
        }
        if let Some(nbf) = claims.get("nbf") {
            let nbf = nbf.as_f64().ok_or("the token's nbf claim must be a number")?;
            if nbf - self.leeway > now {
                return Err("the token is not valid yet");
            }
        }
        if let Some(issuer) = &self.issuer {
            match claims.get("iss") {
                None => return Err("the token has no iss claim"),
                Some(iss) if iss.as_str() != Some(issuer) => return Err("the token's issuer is not accepted"),
                Some(_) => {}
            }
        }
        if let Some(audience) = &self.audience {
            let named = match claims.get("aud") {
                None => return Err("the token has no aud claim"),
                Some(Value::String(aud)) => aud == audience,
                Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
                Some(_) => return Err("the token's aud claim must be a string or a list of strings"),
            };
            if !named {
                return Err("the token's audience does not include this service");
            }
        }
        let id = |name: &str, missing: &'static str, bad: &'static str| match claims.get(name) {
            None => Err(missing),
            Some(value) => value
                .as_str()
                .and_then(|text| Identifier::parse(name, text).ok())
                .map(Identifier::into_string)
                .ok_or(bad),
        };
        Ok(Principal {
            tenant: id(
                "tid",
                "the token has no tid claim",
                "the token's tid claim must be 1-64 characters of A-Z a-z 0-9 . _ -",
            )?,
            user: id(
                "sub",
                "the token has no sub claim",
                "the token's sub claim must be 1-64 characters of A-Z a-z 0-9 . _ -",
            )?,
        })
    }
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

fn decode_object(part: &str) -> Option<Map<String, Value>> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

    fn sign(header: &str, claims: &str, secret: &[u8]) -> String {
        let head = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(head.as_bytes());
        format!("{head}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    fn rules() -> JwtRules {
        JwtRules { secret: SECRET.to_vec(), issuer: None, audience: None, leeway: 30.0 }
    }

    #[test]
    fn a_valid_token_names_tenant_and_user() {
        let token = sign(HS256, r#"{"sub":"u1","tid":"acme","exp":2000}"#, SECRET);
        let who = rules().verify(&token, 1000.0).unwrap();
        assert_eq!((who.tenant.as_str(), who.user.as_str()), ("acme", "u1"));
    }

    #[test]
    fn bad_tokens_are_refused() {
        let claims = r#"{"sub":"u1","tid":"acme","exp":2000}"#;
        let rules = rules();
        assert!(rules.verify(&sign(HS256, claims, b"other"), 1000.0).is_err());
        assert!(rules.verify(&sign(r#"{"alg":"none"}"#, claims, SECRET), 1000.0).is_err());
        assert!(rules.verify(&sign(HS256, r#"{"sub":"u1","tid":"acme"}"#, SECRET), 1000.0).is_err(), "no exp");
        assert!(rules.verify(&sign(HS256, r#"{"sub":"u:1","tid":"acme","exp":2000}"#, SECRET), 1000.0).is_err());
        let unsigned = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims));
        assert!(rules.verify(&unsigned, 1000.0).is_err());
    }

    #[test]
    fn exp_and_nbf_allow_the_leeway_and_no_more() {
        let rules = rules();
        let at = |claims: &str, now: f64| rules.verify(&sign(HS256, claims, SECRET), now);
        let exp = r#"{"sub":"u1","tid":"acme","exp":1000}"#;
        assert!(at(exp, 1010.0).is_ok(), "expired 10 s ago");
        assert!(at(exp, 1029.9).is_ok());
        assert_eq!(at(exp, 1030.0).unwrap_err(), "the token has expired");
        assert!(at(exp, 1040.0).is_err(), "expired 40 s ago");
        let nbf = r#"{"sub":"u1","tid":"acme","exp":5000,"nbf":2000}"#;
        assert!(at(nbf, 1980.0).is_ok(), "valid in 20 s");
        assert_eq!(at(nbf, 1960.0).unwrap_err(), "the token is not valid yet");
        let strict = JwtRules { leeway: 0.0, ..rules };
        assert!(strict.verify(&sign(HS256, exp, SECRET), 1000.0).is_err());
    }

    #[test]
    fn issuer_and_audience_are_checked_when_set() {
        let rules = JwtRules { issuer: Some("https://id.example".into()), audience: Some("unread".into()), ..rules() };
        let verdict = |claims: serde_json::Value| rules.verify(&sign(HS256, &claims.to_string(), SECRET), 1000.0);
        let base = serde_json::json!({"sub": "u1", "tid": "acme", "exp": 2000});
        let with = |extra: serde_json::Value| {
            let mut claims = base.clone();
            claims.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            claims
        };
        assert!(verdict(with(serde_json::json!({"iss": "https://id.example", "aud": "unread"}))).is_ok());
        assert!(verdict(with(serde_json::json!({"iss": "https://id.example", "aud": ["x", "unread"]}))).is_ok());
        for (claims, why) in [
            (with(serde_json::json!({"aud": "unread"})), "the token has no iss claim"),
            (with(serde_json::json!({"iss": "https://evil", "aud": "unread"})), "the token's issuer is not accepted"),
            (
                with(serde_json::json!({"iss": ["https://id.example"], "aud": "unread"})),
                "the token's issuer is not accepted",
            ),
            (with(serde_json::json!({"iss": "https://id.example"})), "the token has no aud claim"),
            (
                with(serde_json::json!({"iss": "https://id.example", "aud": "other"})),
                "the token's audience does not include this service",
            ),
            (
                with(serde_json::json!({"iss": "https://id.example", "aud": []})),
                "the token's audience does not include this service",
            ),
            (
                with(serde_json::json!({"iss": "https://id.example", "aud": 7})),
                "the token's aud claim must be a string or a list of strings",
            ),
        ] {
            assert_eq!(verdict(claims.clone()).unwrap_err(), why, "{claims}");
        }
        // Unset, neither is looked at.
        let open = super::tests::rules();
        assert!(open.verify(&sign(HS256, &with(serde_json::json!({"aud": 7})).to_string(), SECRET), 1000.0).is_ok());
    }

    #[test]
    fn refusals_never_repeat_what_the_token_holds() {
        let rules = rules();
        let claims = r#"{"sub":"s3cret value","tid":"PRIVATE{x}","exp":"soon"}"#;
        for token in [
            sign(HS256, claims, SECRET),
            sign(r#"{"alg":"PRIVATE"}"#, claims, SECRET),
            sign(HS256, r#"{"sub":"s3cret value","tid":"acme","exp":2000}"#, SECRET),
            sign(HS256, r#"{"sub":"u1","tid":"PRIVATE{x}","exp":2000}"#, SECRET),
        ] {
            let why = rules.verify(&token, 1000.0).unwrap_err();
            assert!(!why.contains("s3cret") && !why.contains("PRIVATE") && !why.contains("soon"), "{why}");
        }
    }

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
}
