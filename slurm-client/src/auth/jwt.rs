//! HS256 JSON Web Tokens in the form slurmctld and slurmrestd accept.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The claims of a Slurm JWT.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JwtClaims {
    /// Expiry, in seconds since the Unix epoch.
    pub exp: u64,
    /// Issue time, in seconds since the Unix epoch.
    pub iat: u64,
    /// The Slurm user name the token stands for.
    pub sun: String,
    /// Not valid before, in seconds since the Unix epoch (slurmctld ignores it; other readers may not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Who minted the token, e.g. `slurm-operator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// A unique id of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
}

/// Why a token did not verify in [`verify_hs256`]. Never holds the token or the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not three base64url parts with a JSON header and payload.
    #[error("not a JWT: {0}")]
    Malformed(&'static str),
    /// The header names another algorithm than HS256.
    #[error("JWT algorithm is not HS256")]
    Algorithm,
    /// The signature does not match the key.
    #[error("JWT signature does not match the key")]
    Signature,
}

/// Signs `claims` with HS256 using `key` (the bytes of the cluster's `jwt_hs256.key`,
/// used as they are) and returns the compact JWT.
pub fn mint_hs256(key: &[u8], claims: &JwtClaims) -> SecretString {
    const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;
    let payload = serde_json::to_vec(claims).expect("JWT claims always serialize");
    let mut text = URL_SAFE_NO_PAD.encode(HEADER);
    text.push('.');
    text.push_str(&URL_SAFE_NO_PAD.encode(payload));
    let signature = sign(key, &text);
    text.push('.');
    text.push_str(&signature);
    SecretString::from(text)
}

/// Checks that `token` is an HS256 JWT signed with `key` and returns its claims. Expiry is the
/// caller's to judge (`claims.exp`): a token that verifies may still be expired.
pub fn verify_hs256(key: &[u8], token: &str) -> Result<JwtClaims, JwtError> {
    let mut parts = token.trim().split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed("expected three dot-separated parts"));
    };
    let header: serde_json::Value = URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|h| serde_json::from_slice(&h).ok())
        .ok_or(JwtError::Malformed("header is not base64url JSON"))?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("HS256") {
        return Err(JwtError::Algorithm);
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| JwtError::Malformed("signature is not base64url"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(format!("{}.{payload}", token.trim().split('.').next().unwrap_or("")).as_bytes());
    mac.verify_slice(&signature)
        .map_err(|_| JwtError::Signature)?;
    URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|p| serde_json::from_slice(&p).ok())
        .ok_or(JwtError::Malformed("payload is not base64url JSON claims"))
}

/// The base64url HMAC-SHA256 signature of `signing_input` ("header.payload").
fn sign(key: &[u8], signing_input: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(signing_input.as_bytes());
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn signature_matches_known_answer() {
        // The well-known HS256 example token (header, payload and signature published together).
        let input = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
                     eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ";
        assert_eq!(
            sign(b"your-256-bit-secret", input),
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
        );
    }

    #[test]
    fn token_has_slurm_claims_and_verifies() {
        let claims = JwtClaims {
            exp: 2000,
            iat: 1000,
            sun: "root".into(),
            ..Default::default()
        };
        let token = mint_hs256(b"secret", &claims);
        let parts: Vec<&str> = token.expose_secret().split('.').collect();
        assert_eq!(parts.len(), 3);
        let header = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
        assert_eq!(header, br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload: JwtClaims =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(payload, claims);

        let mut mac = Hmac::<Sha256>::new_from_slice(b"secret").unwrap();
        mac.update(format!("{}.{}", parts[0], parts[1]).as_bytes());
        mac.verify_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap())
            .expect("signature verifies");
    }

    #[test]
    fn verify_accepts_own_tokens_and_rejects_others() {
        let claims = JwtClaims {
            exp: 2000,
            iat: 1000,
            sun: "slurm".into(),
            nbf: Some(1000),
            iss: Some("slurm-operator".into()),
            jti: Some("42".into()),
        };
        let token = mint_hs256(b"key", &claims);
        assert_eq!(verify_hs256(b"key", token.expose_secret()), Ok(claims));
        assert_eq!(
            verify_hs256(b"other", token.expose_secret()),
            Err(JwtError::Signature)
        );
        assert!(matches!(
            verify_hs256(b"key", "a.b"),
            Err(JwtError::Malformed(_))
        ));
        let mut forged = token.expose_secret().to_owned();
        forged.push('x');
        assert!(verify_hs256(b"key", &forged).is_err());
    }
}
