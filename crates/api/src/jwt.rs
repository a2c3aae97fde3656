//! JSON Web Tokens (RFC 7519) signed with HS256, RS256, ES256 or EdDSA
//! (Ed25519): parsing, the keys that verify them, and the claims an app
//! call must carry. No I/O here: `auth` reads the configuration and
//! `jwks` fetches an identity provider's keys.
//!
//! A key verifies one algorithm only, the one its type implies (an RSA key
//! RS256, an HMAC secret HS256): a token cannot choose how its signature is
//! checked, so an RSA public key is never taken for an HMAC secret.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::Identifier;
use crate::core::Principal;

/// The signature algorithms accepted (the `alg` header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// HMAC with SHA-256, keyed by `jwt_secret`.
    Hs256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
}

impl Algorithm {
    fn named(alg: &str) -> Option<Algorithm> {
        match alg {
            "HS256" => Some(Algorithm::Hs256),
            "RS256" => Some(Algorithm::Rs256),
            "ES256" => Some(Algorithm::Es256),
            "EdDSA" => Some(Algorithm::EdDsa),
            _ => None,
        }
    }
}

/// A key that verifies tokens of one algorithm, with its JWKS `kid` if any.
#[derive(Clone, Debug)]
pub struct Key {
    kid: Option<String>,
    verifier: Verifier,
}

#[derive(Clone, Debug)]
enum Verifier {
    Hmac(Vec<u8>),
    Rsa(rsa::pkcs1v15::VerifyingKey<Sha256>),
    P256(p256::ecdsa::VerifyingKey),
    Ed25519(ed25519_dalek::VerifyingKey),
}

/// RSA keys below this many bits are refused (NIST SP 800-131A).
const MIN_RSA_BITS: usize = 2048;

impl Key {
    /// An HS256 secret.
    pub fn hmac(secret: &[u8]) -> Key {
        Key { kid: None, verifier: Verifier::Hmac(secret.to_vec()) }
    }

    /// Every public key of a PEM text (`-----BEGIN PUBLIC KEY-----` blocks,
    /// SubjectPublicKeyInfo): RSA, EC P-256 or Ed25519. The error says
    /// which block is wrong, never what it holds.
    pub fn from_pem(text: &str) -> Result<Vec<Key>, String> {
        use ed25519_dalek::pkcs8::DecodePublicKey as _;
        const END: &str = "-----END PUBLIC KEY-----";
        let mut keys = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("-----BEGIN ") {
            let block = &rest[start..];
            let end = block.find(END).ok_or_else(|| format!("PEM block {} has no END line", keys.len() + 1))?;
            let pem = &block[..end + END.len()];
            let which = keys.len() + 1;
            let verifier = if let Ok(key) = rsa::RsaPublicKey::from_public_key_pem(pem) {
                rsa_verifier(key)?
            } else if let Ok(key) = p256::PublicKey::from_public_key_pem(pem) {
                Verifier::P256(key.into())
            } else if let Ok(key) = ed25519_dalek::VerifyingKey::from_public_key_pem(pem) {
                Verifier::Ed25519(key)
            } else {
                return Err(format!("PEM block {which} is not an RSA, P-256 or Ed25519 public key"));
            };
            keys.push(Key { kid: None, verifier });
            rest = &block[end + END.len()..];
        }
        if keys.is_empty() {
            return Err("it holds no -----BEGIN PUBLIC KEY----- block".into());
        }
        Ok(keys)
    }

    /// A key of a JWKS (RFC 7517): `Ok(None)` for one unread does not use
    /// (another type or curve, an encryption key, an algorithm other than
    /// the one its type implies), an error for one that is malformed.
    pub fn from_jwk(jwk: &Map<String, Value>) -> Result<Option<Key>, String> {
        let text = |name: &str| jwk.get(name).and_then(Value::as_str);
        if text("use").is_some_and(|u| u != "sig") {
            return Ok(None);
        }
        let bytes = |name: &str| {
            let value = text(name).ok_or_else(|| format!("a JWK has no {name}"))?;
            URL_SAFE_NO_PAD.decode(value).map_err(|_| format!("a JWK's {name} is not base64url"))
        };
        let (verifier, algorithm) = match (text("kty"), text("crv")) {
            (Some("RSA"), _) => {
                let (n, e) = (bytes("n")?, bytes("e")?);
                let key = rsa::RsaPublicKey::new(rsa::BigUint::from_bytes_be(&n), rsa::BigUint::from_bytes_be(&e))
                    .map_err(|_| "a JWK's RSA key is not valid".to_string())?;
                (rsa_verifier(key)?, Algorithm::Rs256)
            }
            (Some("EC"), Some("P-256")) => {
                let (x, y) = (bytes("x")?, bytes("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err("a JWK's P-256 coordinates are not 32 bytes".into());
                }
                let point =
                    p256::EncodedPoint::from_affine_coordinates(x.as_slice().into(), y.as_slice().into(), false);
                let key = p256::ecdsa::VerifyingKey::from_encoded_point(&point)
                    .map_err(|_| "a JWK's P-256 point is not on the curve".to_string())?;
                (Verifier::P256(key), Algorithm::Es256)
            }
            (Some("OKP"), Some("Ed25519")) => {
                let x: [u8; 32] =
                    bytes("x")?.try_into().map_err(|_| "a JWK's Ed25519 key is not 32 bytes".to_string())?;
                let key = ed25519_dalek::VerifyingKey::from_bytes(&x)
                    .map_err(|_| "a JWK's Ed25519 key is not valid".to_string())?;
                (Verifier::Ed25519(key), Algorithm::EdDsa)
            }
            _ => return Ok(None),
        };
        if text("alg").is_some_and(|alg| Algorithm::named(alg) != Some(algorithm)) {
            return Ok(None);
        }
        Ok(Some(Key { kid: text("kid").map(str::to_string), verifier }))
    }

    fn algorithm(&self) -> Algorithm {
        match self.verifier {
            Verifier::Hmac(_) => Algorithm::Hs256,
            Verifier::Rsa(_) => Algorithm::Rs256,
            Verifier::P256(_) => Algorithm::Es256,
            Verifier::Ed25519(_) => Algorithm::EdDsa,
        }
    }

    /// Whether this key may check `token`: the same algorithm, and the same
    /// `kid` when both name one.
    pub fn fits(&self, token: &Token<'_>) -> bool {
        self.algorithm() == token.algorithm
            && match (&self.kid, &token.kid) {
                (Some(mine), Some(theirs)) => mine == theirs,
                _ => true,
            }
    }

    /// Whether `token` names a `kid` none of `keys` has, for an algorithm a
    /// JWKS can publish: the provider may have rotated to a key not seen yet.
    pub fn unknown_to(keys: &[Key], token: &Token<'_>) -> bool {
        token.algorithm != Algorithm::Hs256
            && token.kid.as_ref().is_some_and(|kid| !keys.iter().any(|key| key.kid.as_ref() == Some(kid)))
    }

    /// Whether `token`'s signature is this key's.
    pub fn verifies(&self, token: &Token<'_>) -> bool {
        use rsa::signature::Verifier as _;
        let (signed, signature) = (token.signed.as_bytes(), token.signature.as_slice());
        match &self.verifier {
            Verifier::Hmac(secret) => Hmac::<Sha256>::new_from_slice(secret)
                .map(|mut mac| {
                    mac.update(signed);
                    mac.verify_slice(signature).is_ok()
                })
                .unwrap_or(false),
            Verifier::Rsa(key) => {
                rsa::pkcs1v15::Signature::try_from(signature).is_ok_and(|s| key.verify(signed, &s).is_ok())
            }
            // JWS carries ECDSA signatures as r || s (64 bytes), not DER.
            Verifier::P256(key) => {
                p256::ecdsa::Signature::from_slice(signature).is_ok_and(|s| key.verify(signed, &s).is_ok())
            }
            Verifier::Ed25519(key) => {
                ed25519_dalek::Signature::from_slice(signature).is_ok_and(|s| key.verify_strict(signed, &s).is_ok())
            }
        }
    }
}

fn rsa_verifier(key: rsa::RsaPublicKey) -> Result<Verifier, String> {
    use rsa::traits::PublicKeyParts as _;
    if key.size() * 8 < MIN_RSA_BITS {
        return Err(format!("an RSA key is shorter than {MIN_RSA_BITS} bits"));
    }
    Ok(Verifier::Rsa(rsa::pkcs1v15::VerifyingKey::new(key)))
}

/// A token split into its parts; nothing in it is trusted yet.
pub struct Token<'a> {
    algorithm: Algorithm,
    kid: Option<String>,
    signed: &'a str,
    signature: Vec<u8>,
    claims: &'a str,
}

impl<'a> Token<'a> {
    /// Splits `text` and reads its header.
    pub fn parse(text: &'a str) -> Result<Token<'a>, &'static str> {
        let mut parts = text.split('.');
        let (Some(encoded_header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("the token is not a JWT");
        };
        let header = decode_object(encoded_header).ok_or("the token's header is not base64url JSON")?;
        let algorithm = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(Algorithm::named)
            .ok_or("the token's alg must be HS256, RS256, ES256 or EdDSA")?;
        if header.contains_key("crit") {
            return Err("the token has critical header extensions this service does not know");
        }
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err("the token's kid must be a string"),
        };
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| "the token's signature is not base64url")?;
        Ok(Token { algorithm, kid, signed: &text[..encoded_header.len() + claims.len() + 1], signature, claims })
    }

    /// The claims, once a key verified the signature.
    fn claims(&self) -> Result<Map<String, Value>, &'static str> {
        decode_object(self.claims).ok_or("the token's claims are not base64url JSON")
    }
}

/// Where the tenant of an app call comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantSource {
    /// A claim of the token, by name (`tid` unless `tenant_claim` says otherwise).
    Claim(String),
    /// One tenant for every token (`fixed_tenant`): single-tenant apps.
    Fixed(String),
}

/// What a verified token's claims must satisfy, and where the principal is.
#[derive(Clone, Debug)]
pub struct ClaimRules {
    /// When set, `iss` must equal it.
    pub issuer: Option<String>,
    /// When set, `aud` (a string or a list) must contain it.
    pub audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway: f64,
    /// The claim naming the user (`sub` unless `user_claim` says otherwise).
    pub user_claim: String,
    /// Where the tenant is.
    pub tenant: TenantSource,
}

impl ClaimRules {
    /// The principal of `token`, once one of `keys` verified it.
    pub fn principal(&self, token: &Token<'_>, now: f64) -> Result<Principal, &'static str> {
        let claims = token.claims()?;
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
        let user = identifier(&claims, &self.user_claim, "the token has no user claim", USER_RULE)?;
        let tenant = match &self.tenant {
            TenantSource::Fixed(tenant) => tenant.clone(),
            TenantSource::Claim(name) => identifier(&claims, name, "the token has no tenant claim", TENANT_RULE)?,
        };
        Ok(Principal { tenant, user })
    }
}

const USER_RULE: &str =
    "the token's user claim must be a string of 1-128 bytes of UTF-8 without control characters, and not `*` alone";
const TENANT_RULE: &str =
    "the token's tenant claim must be a string of 1-128 bytes of UTF-8 without control characters, and not `*` alone";

fn identifier(
    claims: &Map<String, Value>,
    name: &str,
    missing: &'static str,
    bad: &'static str,
) -> Result<String, &'static str> {
    let value = claims.get(name).ok_or(missing)?;
    value.as_str().and_then(|text| Identifier::parse(name, text).ok()).map(Identifier::into_string).ok_or(bad)
}

fn decode_object(part: &str) -> Option<Map<String, Value>> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn sign_hs256(header: &str, claims: &str, secret: &[u8]) -> String {
        let head = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(head.as_bytes());
        format!("{head}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    fn rules() -> ClaimRules {
        ClaimRules {
            issuer: None,
            audience: None,
            leeway: 30.0,
            user_claim: "sub".into(),
            tenant: TenantSource::Claim("tid".into()),
        }
    }

    /// The principal of `token` if `keys` verify it, as `auth` does.
    fn verify(keys: &[Key], rules: &ClaimRules, token: &str, now: f64) -> Result<Principal, &'static str> {
        let token = Token::parse(token)?;
        if !keys.iter().any(|key| key.fits(&token) && key.verifies(&token)) {
            return Err("the token's signature is not valid");
        }
        rules.principal(&token, now)
    }

    const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

    #[test]
    fn a_valid_token_names_tenant_and_user() {
        let token = sign_hs256(HS256, r#"{"sub":"alice@example.com","tid":"acme","exp":2000}"#, SECRET);
        let who = verify(&[Key::hmac(SECRET)], &rules(), &token, 1000.0).unwrap();
        assert_eq!((who.tenant.as_str(), who.user.as_str()), ("acme", "alice@example.com"));
    }

    #[test]
    fn claims_are_read_where_the_app_puts_them() {
        let claims = r#"{"sub":"x","https://app.example/uid":"auth0|64f1","org":"beta","exp":2000}"#;
        let token = sign_hs256(HS256, claims, SECRET);
        let mut rules = rules();
        rules.user_claim = "https://app.example/uid".into();
        rules.tenant = TenantSource::Claim("org".into());
        let who = verify(&[Key::hmac(SECRET)], &rules, &token, 1000.0).unwrap();
        assert_eq!((who.tenant.as_str(), who.user.as_str()), ("beta", "auth0|64f1"));
        rules.tenant = TenantSource::Fixed("solo".into());
        let who = verify(&[Key::hmac(SECRET)], &rules, &token, 1000.0).unwrap();
        assert_eq!(who.tenant, "solo", "a fixed tenant ignores every claim");
        rules.user_claim = "uid".into();
        assert_eq!(verify(&[Key::hmac(SECRET)], &rules, &token, 1000.0).unwrap_err(), "the token has no user claim");
    }

    #[test]
    fn bad_tokens_are_refused() {
        let claims = r#"{"sub":"u1","tid":"acme","exp":2000}"#;
        let keys = [Key::hmac(SECRET)];
        let rules = rules();
        assert!(verify(&keys, &rules, &sign_hs256(HS256, claims, b"other"), 1000.0).is_err());
        assert!(verify(&keys, &rules, &sign_hs256(r#"{"alg":"none"}"#, claims, SECRET), 1000.0).is_err());
        assert!(verify(&keys, &rules, &sign_hs256(HS256, r#"{"sub":"u1","tid":"acme"}"#, SECRET), 1000.0).is_err());
        let control = r#"{"sub":"u\n1","tid":"acme","exp":2000}"#;
        assert_eq!(verify(&keys, &rules, &sign_hs256(HS256, control, SECRET), 1000.0).unwrap_err(), USER_RULE);
        let number = r#"{"sub":"u1","tid":7,"exp":2000}"#;
        assert_eq!(verify(&keys, &rules, &sign_hs256(HS256, number, SECRET), 1000.0).unwrap_err(), TENANT_RULE);
        let unsigned = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims));
        assert!(verify(&keys, &rules, &unsigned, 1000.0).is_err());
        let crit = r#"{"alg":"HS256","crit":["exp"]}"#;
        assert!(verify(&keys, &rules, &sign_hs256(crit, claims, SECRET), 1000.0).is_err());
    }

    #[test]
    fn an_asymmetric_algorithm_is_never_checked_as_an_hmac() {
        // Signed with HMAC keyed by the text of what an RS256 verifier holds:
        // refused, since only an RSA key checks RS256.
        let token = sign_hs256(r#"{"alg":"RS256"}"#, r#"{"sub":"u1","tid":"acme","exp":2000}"#, SECRET);
        assert!(verify(&[Key::hmac(SECRET)], &rules(), &token, 1000.0).is_err());
    }

    #[test]
    fn exp_and_nbf_allow_the_leeway_and_no_more() {
        let keys = [Key::hmac(SECRET)];
        let rules = rules();
        let at =
            |rules: &ClaimRules, claims: &str, now: f64| verify(&keys, rules, &sign_hs256(HS256, claims, SECRET), now);
        let exp = r#"{"sub":"u1","tid":"acme","exp":1000}"#;
        assert!(at(&rules, exp, 1010.0).is_ok(), "expired 10 s ago");
        assert!(at(&rules, exp, 1029.9).is_ok());
        assert_eq!(at(&rules, exp, 1030.0).unwrap_err(), "the token has expired");
        let nbf = r#"{"sub":"u1","tid":"acme","exp":5000,"nbf":2000}"#;
        assert!(at(&rules, nbf, 1980.0).is_ok(), "valid in 20 s");
        assert_eq!(at(&rules, nbf, 1960.0).unwrap_err(), "the token is not valid yet");
        let strict = ClaimRules { leeway: 0.0, ..rules };
        assert!(at(&strict, exp, 1000.0).is_err());
    }

    #[test]
    fn issuer_and_audience_are_checked_when_set() {
        let keys = [Key::hmac(SECRET)];
        let rules =
            ClaimRules { issuer: Some("https://id.example".into()), audience: Some("unread".into()), ..rules() };
        let verdict = |claims: Value| verify(&keys, &rules, &sign_hs256(HS256, &claims.to_string(), SECRET), 1000.0);
        let with = |extra: Value| {
            let mut claims = json!({"sub": "u1", "tid": "acme", "exp": 2000});
            claims.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            claims
        };
        assert!(verdict(with(json!({"iss": "https://id.example", "aud": "unread"}))).is_ok());
        assert!(verdict(with(json!({"iss": "https://id.example", "aud": ["x", "unread"]}))).is_ok());
        for (claims, why) in [
            (with(json!({"aud": "unread"})), "the token has no iss claim"),
            (with(json!({"iss": "https://evil", "aud": "unread"})), "the token's issuer is not accepted"),
            (with(json!({"iss": ["https://id.example"], "aud": "unread"})), "the token's issuer is not accepted"),
            (with(json!({"iss": "https://id.example"})), "the token has no aud claim"),
            (
                with(json!({"iss": "https://id.example", "aud": "other"})),
                "the token's audience does not include this service",
            ),
            (
                with(json!({"iss": "https://id.example", "aud": []})),
                "the token's audience does not include this service",
            ),
            (
                with(json!({"iss": "https://id.example", "aud": 7})),
                "the token's aud claim must be a string or a list of strings",
            ),
        ] {
            assert_eq!(verdict(claims.clone()).unwrap_err(), why, "{claims}");
        }
    }

    #[test]
    fn refusals_never_repeat_what_the_token_holds() {
        let keys = [Key::hmac(SECRET)];
        let claims = r#"{"sub":"s3cret\u0001value","tid":"PRIVATE\u0002x","exp":"soon"}"#;
        for token in [
            sign_hs256(HS256, claims, SECRET),
            sign_hs256(r#"{"alg":"PRIVATE"}"#, claims, SECRET),
            sign_hs256(r#"{"alg":"HS256","kid":["PRIVATE"]}"#, claims, SECRET),
            sign_hs256(HS256, r#"{"sub":"s3cret\u0001value","tid":"acme","exp":2000}"#, SECRET),
            sign_hs256(HS256, r#"{"sub":"u1","tid":"PRIVATE\u0002x","exp":2000}"#, SECRET),
        ] {
            let why = verify(&keys, &rules(), &token, 1000.0).unwrap_err();
            assert!(!why.contains("s3cret") && !why.contains("PRIVATE") && !why.contains("soon"), "{why}");
        }
    }

    #[test]
    fn the_claim_messages_state_the_identifier_rule() {
        assert!(USER_RULE.ends_with(crate::ident::IDENTIFIER_RULE));
        assert!(TENANT_RULE.ends_with(crate::ident::IDENTIFIER_RULE));
    }

    /// `claims` signed with `alg` by `sign`, with `kid` in the header if given.
    fn signed(alg: &str, kid: Option<&str>, claims: &str, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
        let header = match kid {
            Some(kid) => json!({"alg": alg, "kid": kid}),
            None => json!({"alg": alg}),
        };
        let head = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims));
        format!("{head}.{}", URL_SAFE_NO_PAD.encode(sign(head.as_bytes())))
    }

    const CLAIMS: &str = r#"{"sub":"auth0|64f1","tid":"acme","exp":2000}"#;

    #[test]
    fn rs256_es256_and_eddsa_verify_from_jwks_and_pem() {
        use ed25519_dalek::pkcs8::EncodePublicKey as _;
        use rsa::signature::{SignatureEncoding as _, Signer as _};
        use rsa::traits::PublicKeyParts as _;

        let rsa_key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
        let rsa_signer = rsa::pkcs1v15::SigningKey::<Sha256>::new(rsa_key.clone());
        let p256_key = p256::ecdsa::SigningKey::from_slice(&[7; 32]).unwrap();
        let ed_key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);

        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let point = p256_key.verifying_key().to_encoded_point(false);
        let jwks = [
            json!({"kty": "RSA", "kid": "r1", "n": b64(&rsa_key.n().to_bytes_be()), "e": b64(&rsa_key.e().to_bytes_be())}),
            json!({"kty": "EC", "crv": "P-256", "kid": "e1", "x": b64(point.x().unwrap()), "y": b64(point.y().unwrap())}),
            json!({"kty": "OKP", "crv": "Ed25519", "kid": "d1", "alg": "EdDSA", "x": b64(ed_key.verifying_key().as_bytes())}),
        ];
        let from_jwks: Vec<Key> =
            jwks.iter().map(|k| Key::from_jwk(k.as_object().unwrap()).unwrap().unwrap()).collect();
        let pem = [
            rsa::RsaPublicKey::from(&rsa_key).to_public_key_pem(Default::default()).unwrap(),
            p256::PublicKey::from(p256_key.verifying_key()).to_public_key_pem(Default::default()).unwrap(),
            ed_key.verifying_key().to_public_key_pem(Default::default()).unwrap(),
        ]
        .concat();
        let from_pem = Key::from_pem(&pem).unwrap();
        assert_eq!(from_pem.len(), 3);

        let rs = |kid| signed("RS256", kid, CLAIMS, |m| rsa_signer.sign(m).to_vec());
        let es = |kid| {
            signed("ES256", kid, CLAIMS, |m| {
                let s: p256::ecdsa::Signature = p256_key.sign(m);
                s.to_bytes().to_vec()
            })
        };
        let ed = |kid| signed("EdDSA", kid, CLAIMS, |m| ed_key.sign(m).to_bytes().to_vec());
        for (token, kid) in [(rs(Some("r1")), "r1"), (es(Some("e1")), "e1"), (ed(Some("d1")), "d1")] {
            let who = verify(&from_jwks, &rules(), &token, 1000.0).unwrap();
            assert_eq!(who.user, "auth0|64f1");
            assert!(verify(&from_pem, &rules(), &token, 1000.0).is_ok(), "PEM keys have no kid: any kid fits");
            // Another key's kid: not checked by the key that signed it.
            let others: Vec<Key> = from_jwks.iter().filter(|k| k.kid.as_deref() != Some(kid)).cloned().collect();
            assert!(verify(&others, &rules(), &token, 1000.0).is_err());
        }
        for token in [rs(None), es(None), ed(None)] {
            assert!(verify(&from_jwks, &rules(), &token, 1000.0).is_ok(), "a token without kid tries every key");
        }
        // A token altered after signing, and one claiming another algorithm.
        let tampered = rs(Some("r1")).replacen(".", ".e", 1);
        assert!(verify(&from_jwks, &rules(), &tampered, 1000.0).is_err());
        let (_, tail) = es(Some("e1")).split_once('.').map(|(h, t)| (h.to_string(), t.to_string())).unwrap();
        let relabelled = format!("{}.{tail}", b64(br#"{"alg":"EdDSA","kid":"e1"}"#));
        assert!(verify(&from_jwks, &rules(), &relabelled, 1000.0).is_err());
    }

    #[test]
    fn only_a_kid_no_key_has_asks_for_newer_keys() {
        let jwk =
            json!({"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"});
        let keys = [Key::from_jwk(jwk.as_object().unwrap()).unwrap().unwrap()];
        let token = |header: &str| sign_hs256(header, "{}", SECRET);
        let unknown = |header: &str| Key::unknown_to(&keys, &Token::parse(&token(header)).unwrap());
        assert!(unknown(r#"{"alg":"EdDSA","kid":"k2"}"#));
        assert!(unknown(r#"{"alg":"RS256","kid":"k2"}"#));
        assert!(!unknown(r#"{"alg":"EdDSA","kid":"k1"}"#), "a known kid");
        assert!(!unknown(r#"{"alg":"RS256","kid":"k1"}"#), "a known kid, another algorithm: forged, not new");
        assert!(!unknown(r#"{"alg":"HS256","kid":"k2"}"#), "no JWKS publishes HMAC secrets");
        assert!(!unknown(r#"{"alg":"EdDSA"}"#), "no kid");
    }

    #[test]
    fn jwks_keys_of_other_kinds_are_skipped_and_malformed_ones_refused() {
        let skip = |jwk: Value| Key::from_jwk(jwk.as_object().unwrap()).unwrap().is_none();
        assert!(skip(json!({"kty": "oct", "k": "AAAA"})));
        assert!(skip(json!({"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"})));
        assert!(skip(json!({"kty": "OKP", "crv": "X25519", "x": "AA"})));
        assert!(skip(json!({"kty": "RSA", "use": "enc", "n": "AA", "e": "AQAB"})));
        let bad = |jwk: Value| Key::from_jwk(jwk.as_object().unwrap()).is_err();
        assert!(bad(json!({"kty": "RSA", "e": "AQAB"})), "no modulus");
        assert!(bad(json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"})), "a 17-bit modulus");
        assert!(bad(json!({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"})));
        assert!(bad(json!({"kty": "OKP", "crv": "Ed25519", "x": "!!"})));
    }

    #[test]
    fn pem_text_without_a_public_key_is_refused() {
        assert!(Key::from_pem("").is_err());
        assert!(Key::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").is_err());
        assert!(Key::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n").is_err());
    }
}
