//! HS256 JSON Web Tokens in the form slurmctld and slurmrestd accept.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The claims of a Slurm JWT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JwtClaims {
    /// Expiry, in seconds since the Unix epoch.
    pub exp: u64,
    /// Issue time, in seconds since the Unix epoch.
    pub iat: u64,
    /// The Slurm user name the token stands for.
    pub sun: String,
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
}
