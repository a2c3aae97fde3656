//! Who is calling: app users by JWT (HS256, `jwt_secret`), the app's backend
//! by a shared service token (`service_token`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use spin_sdk::http::Request;
use subtle::ConstantTimeEq;

use crate::core::Principal;
use crate::{Identifier, Problem};

#[derive(Deserialize)]
struct Header {
    alg: String,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    tid: String,
    exp: f64,
    nbf: Option<f64>,
}

/// The tenant and user of an app call, from its `Authorization: Bearer <JWT>`.
pub async fn app_principal(request: &Request) -> Result<Principal, Problem> {
    let token = bearer(request)?;
    let secret = variable("jwt_secret").await?;
    let who = verify_jwt(token, secret.as_bytes(), now_seconds()).map_err(Problem::unauthorized)?;
    crate::serve::note_tenant(&who.tenant);
    Ok(who)
}

/// Accepts a service call whose bearer token is `service_token`.
pub async fn service_call(request: &Request) -> Result<(), Problem> {
    let token = bearer(request)?;
    let expected = variable("service_token").await?;
    if bool::from(token.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(Problem::unauthorized("the service token is not valid"))
    }
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

async fn variable(name: &str) -> Result<String, Problem> {
    spin_sdk::variables::get(name)
        .await
        .map_err(|e| Problem::unavailable(format!("variable {name} is not available: {e:?}")))
}

fn now_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Verifies an HS256 JWT and returns its tenant (`tid`) and user (`sub`).
fn verify_jwt(token: &str, secret: &[u8], now: f64) -> Result<Principal, String> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the token is not a JWT".into());
    };
    let header: Header = decode_part(header)?;
    if header.alg != "HS256" {
        return Err(format!("the token's alg must be HS256, not {:?}", header.alg));
    }
    let signature =
        URL_SAFE_NO_PAD.decode(signature).map_err(|_| "the token's signature is not base64url".to_string())?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| "bad secret".to_string())?;
    mac.update(&token.as_bytes()[..header_and_payload_len(token)]);
    mac.verify_slice(&signature).map_err(|_| "the token's signature is not valid".to_string())?;
    let claims: Claims = decode_part(payload)?;
    if claims.exp <= now {
        return Err("the token has expired".into());
    }
    if claims.nbf.is_some_and(|nbf| nbf > now) {
        return Err("the token is not valid yet".into());
    }
    Ok(Principal {
        tenant: Identifier::parse("tid", &claims.tid)?.into_string(),
        user: Identifier::parse("sub", &claims.sub)?.into_string(),
    })
}

fn header_and_payload_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(0)
}

fn decode_part<T: for<'de> Deserialize<'de>>(part: &str) -> Result<T, String> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| "the token is not base64url".to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("the token's JSON is not valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(header: &str, claims: &str, secret: &[u8]) -> String {
        let head = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(head.as_bytes());
        format!("{head}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

    #[test]
    fn a_valid_token_names_tenant_and_user() {
        let token = sign(HS256, r#"{"sub":"u1","tid":"acme","exp":2000}"#, b"s");
        let who = verify_jwt(&token, b"s", 1000.0).unwrap();
        assert_eq!((who.tenant.as_str(), who.user.as_str()), ("acme", "u1"));
    }

    #[test]
    fn bad_tokens_are_refused() {
        let claims = r#"{"sub":"u1","tid":"acme","exp":2000}"#;
        assert!(verify_jwt(&sign(HS256, claims, b"other"), b"s", 1000.0).is_err());
        assert!(verify_jwt(&sign(HS256, claims, b"s"), b"s", 2000.0).is_err(), "expired");
        assert!(verify_jwt(&sign(r#"{"alg":"none"}"#, claims, b"s"), b"s", 1000.0).is_err());
        assert!(verify_jwt(&sign(HS256, r#"{"sub":"u1","tid":"acme"}"#, b"s"), b"s", 1000.0).is_err(), "no exp");
        assert!(verify_jwt(&sign(HS256, r#"{"sub":"u:1","tid":"acme","exp":2000}"#, b"s"), b"s", 1000.0).is_err());
        let unsigned = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims));
        assert!(verify_jwt(&unsigned, b"s", 1000.0).is_err());
    }
}
