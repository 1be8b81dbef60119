//! HS256 JSON Web Tokens in the form slurmctld and slurmrestd accept.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The claims of a Slurm JWT.
///
/// Build claims with [`JwtClaims::new`] and the setters; more claims may be added in a
/// minor release.
///
/// ```
/// use std::time::Duration;
/// use slurm_client::JwtClaims;
/// let claims = JwtClaims::new("alice", Duration::from_secs(600))
///     .issued_at(1_700_000_000)
///     .expires_at(1_700_000_600)
///     .issuer("my-tool");
/// assert_eq!(claims.sun, "alice");
/// assert_eq!(claims.iss.as_deref(), Some("my-tool"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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

impl JwtClaims {
    /// Claims for `user`, issued now and expiring `lifespan` later (rounded down to whole
    /// seconds); no `nbf`, `iss` or `jti`.
    pub fn new(user: impl Into<String>, lifespan: Duration) -> JwtClaims {
        let iat = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        JwtClaims {
            exp: iat.saturating_add(lifespan.as_secs()),
            iat,
            sun: user.into(),
            nbf: None,
            iss: None,
            jti: None,
        }
    }

    /// Sets the issue time (`iat`), in seconds since the Unix epoch. The expiry stays as it is.
    pub fn issued_at(mut self, secs: u64) -> JwtClaims {
        self.iat = secs;
        self
    }

    /// Sets the expiry (`exp`), in seconds since the Unix epoch.
    pub fn expires_at(mut self, secs: u64) -> JwtClaims {
        self.exp = secs;
        self
    }

    /// Sets the time the token is not valid before (`nbf`), in seconds since the Unix epoch.
    pub fn not_before(mut self, secs: u64) -> JwtClaims {
        self.nbf = Some(secs);
        self
    }

    /// Sets who minted the token (`iss`).
    pub fn issuer(mut self, issuer: impl Into<String>) -> JwtClaims {
        self.iss = Some(issuer.into());
        self
    }

    /// Sets the token's unique id (`jti`).
    pub fn id(mut self, id: impl Into<String>) -> JwtClaims {
        self.jti = Some(id.into());
        self
    }
}

/// Why a token did not verify in [`verify_hs256`]. Never holds the token or the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    fn new_claims_run_from_now_for_the_lifespan() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = JwtClaims::new("alice", Duration::from_millis(90_999));
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(before <= claims.iat && claims.iat <= after, "{claims:?}");
        assert_eq!(claims.exp, claims.iat + 90);
        assert_eq!(claims.sun, "alice");
        assert_eq!((claims.nbf, claims.iss, claims.jti), (None, None, None));
    }

    #[test]
    fn setters_fill_every_claim() {
        let claims = JwtClaims::new("slurm", Duration::ZERO)
            .issued_at(1000)
            .expires_at(2000)
            .not_before(1000)
            .issuer("slurm-operator")
            .id("42");
        assert_eq!(
            claims,
            JwtClaims {
                exp: 2000,
                iat: 1000,
                sun: "slurm".into(),
                nbf: Some(1000),
                iss: Some("slurm-operator".into()),
                jti: Some("42".into()),
            }
        );
        let lifetime = JwtClaims::new("u", Duration::from_secs(u64::MAX));
        assert_eq!(lifetime.exp, u64::MAX);
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
