//! An identity provider's signing keys, for the tokens tests and benchmarks
//! sign: RS256, ES256 and EdDSA keys with their JWKs and PEM public keys.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::EncodePublicKey as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use rsa::traits::PublicKeyParts as _;
use serde_json::{Value, json};

/// Signs a token's `header.claims` text.
type Sign = Box<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// A provider's signing key: its JWK and a way to sign with it.
pub struct SigningKey {
    pub kid: String,
    pub alg: &'static str,
    pub jwk: Value,
    /// The public key as PEM (SubjectPublicKeyInfo).
    pub pem: String,
    sign: Sign,
}

/// Base64url without padding, as JWTs and JWKs write bytes.
pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl SigningKey {
    /// A fresh 2048-bit RSA key.
    pub fn rs256(kid: &str) -> SigningKey {
        let key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).unwrap();
        let jwk = json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                         "n": b64(&key.n().to_bytes_be()), "e": b64(&key.e().to_bytes_be())});
        let pem = rsa::RsaPublicKey::from(&key).to_public_key_pem(Default::default()).unwrap();
        let signer = rsa::pkcs1v15::SigningKey::<rsa::sha2::Sha256>::new(key);
        SigningKey { kid: kid.into(), alg: "RS256", jwk, pem, sign: Box::new(move |m| signer.sign(m).to_vec()) }
    }

    /// A fresh P-256 key.
    pub fn es256(kid: &str) -> SigningKey {
        let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
        let point = key.verifying_key().to_encoded_point(false);
        let pem = p256::PublicKey::from(key.verifying_key()).to_public_key_pem(Default::default()).unwrap();
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid,
                         "x": b64(point.x().unwrap()), "y": b64(point.y().unwrap())});
        let sign = move |m: &[u8]| {
            let signature: p256::ecdsa::Signature = key.sign(m);
            signature.to_bytes().to_vec()
        };
        SigningKey { kid: kid.into(), alg: "ES256", jwk, pem, sign: Box::new(sign) }
    }

    /// A fresh Ed25519 key.
    pub fn ed25519(kid: &str) -> SigningKey {
        let key = ed25519_dalek::SigningKey::generate(&mut rand_core::OsRng);
        let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(key.verifying_key().as_bytes())});
        let pem = key.verifying_key().to_public_key_pem(Default::default()).unwrap();
        SigningKey { kid: kid.into(), alg: "EdDSA", jwk, pem, sign: Box::new(move |m| key.sign(m).to_bytes().to_vec()) }
    }

    /// The same key under another `kid`.
    pub fn renamed(self, kid: &str) -> SigningKey {
        SigningKey { kid: kid.into(), ..self }
    }

    /// A token with `claims`, its header naming this key.
    pub fn token(&self, claims: &Value) -> String {
        let header = json!({"alg": self.alg, "typ": "JWT", "kid": self.kid});
        let head = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        format!("{head}.{}", b64(&(self.sign)(head.as_bytes())))
    }
}
