//! Tokens minted locally from the cluster's HS256 key.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use secrecy::{ExposeSecret, SecretSlice, SecretString};

use super::jwt::{JwtClaims, mint_hs256};
use super::{TokenError, TokenFuture, TokenProvider};
use crate::error::Error;

/// Mints its own tokens, signed with the cluster's JWT key (`jwt_hs256.key`), the way
/// `scontrol token` does.
///
/// A token lives for [`MintedToken::lifespan`] (30 minutes unless changed) and a new one
/// is minted once 80% of that has passed, so a token in use is never close to expiry.
/// Whoever holds the key can act as any user: keep the key file as private as slurmctld's.
pub struct MintedToken {
    key: SecretSlice<u8>,
    user: String,
    lifespan: Duration,
    current: Mutex<Option<Minted>>,
}

struct Minted {
    token: SecretString,
    renew_after: SystemTime,
}

impl MintedToken {
    /// The default token lifespan: 30 minutes, as for `scontrol token`.
    pub const DEFAULT_LIFESPAN: Duration = Duration::from_secs(1800);

    /// A provider signing tokens for `user` with `key`.
    pub fn new(key: impl Into<SecretSlice<u8>>, user: impl Into<String>) -> MintedToken {
        MintedToken {
            key: key.into(),
            user: user.into(),
            lifespan: Self::DEFAULT_LIFESPAN,
            current: Mutex::new(None),
        }
    }

    /// A provider signing tokens for `user` with the key read from `path`.
    pub fn from_key_file(
        path: impl AsRef<Path>,
        user: impl Into<String>,
    ) -> Result<MintedToken, Error> {
        let path = path.as_ref();
        let key = std::fs::read(path).map_err(|e| {
            Error::Config(format!("cannot read JWT key file {}: {e}", path.display()))
        })?;
        if key.is_empty() {
            return Err(Error::Config(format!(
                "JWT key file {} is empty",
                path.display()
            )));
        }
        let user = user.into();
        if user.is_empty() {
            return Err(Error::Config(
                "a user name is needed to mint Slurm tokens".into(),
            ));
        }
        Ok(MintedToken::new(key, user))
    }

    /// Sets how long each minted token is valid (at least one second).
    pub fn lifespan(mut self, lifespan: Duration) -> MintedToken {
        self.lifespan = lifespan.max(Duration::from_secs(1));
        self
    }

    /// The user the tokens stand for.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Mints a token valid from `now` for the configured lifespan.
    pub fn mint_at(&self, now: SystemTime) -> Result<SecretString, TokenError> {
        let iat = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| TokenError::new("system clock is before 1970"))?
            .as_secs();
        let claims = JwtClaims {
            iat,
            exp: iat + self.lifespan.as_secs(),
            sun: self.user.clone(),
            ..Default::default()
        };
        Ok(mint_hs256(self.key.expose_secret(), &claims))
    }

    fn current_token(&self) -> Result<SecretString, TokenError> {
        let now = SystemTime::now();
        let mut current = self.current.lock().expect("minted token lock");
        if let Some(m) = current.as_ref().filter(|m| now < m.renew_after) {
            return Ok(m.token.clone());
        }
        let token = self.mint_at(now)?;
        *current = Some(Minted {
            token: token.clone(),
            renew_after: now + self.lifespan.mul_f64(0.8),
        });
        Ok(token)
    }
}

impl std::fmt::Debug for MintedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MintedToken")
            .field("key", &"[REDACTED]")
            .field("user", &self.user)
            .field("lifespan", &self.lifespan)
            .finish_non_exhaustive()
    }
}

impl TokenProvider for MintedToken {
    fn token(&self) -> TokenFuture<'_> {
        let result = self.current_token();
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    fn claims(token: &SecretString) -> JwtClaims {
        let payload = token.expose_secret().split('.').nth(1).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
    }

    #[test]
    fn claims_have_user_and_lifespan() {
        let p = MintedToken::new(b"k".to_vec(), "alice").lifespan(Duration::from_secs(600));
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let c = claims(&p.mint_at(now).unwrap());
        assert_eq!(
            c,
            JwtClaims {
                iat: 1_700_000_000,
                exp: 1_700_000_600,
                sun: "alice".into(),
                ..Default::default()
            }
        );
    }

    #[tokio::test]
    async fn token_is_reused_until_renewal_point() {
        let p = MintedToken::new(b"k".to_vec(), "root");
        let a = p.token().await.unwrap();
        let b = p.token().await.unwrap();
        assert_eq!(a.expose_secret(), b.expose_secret());
        let c = claims(&a);
        assert_eq!(c.exp - c.iat, 1800);
        // Pretend the renewal point has passed.
        p.current.lock().unwrap().as_mut().unwrap().renew_after = UNIX_EPOCH;
        let renewed = p.token().await.unwrap();
        assert!(claims(&renewed).iat >= c.iat);
        assert!(p.current.lock().unwrap().as_ref().unwrap().renew_after > SystemTime::now());
    }

    #[test]
    fn key_file_errors_name_the_file() {
        let err = MintedToken::from_key_file("/nonexistent/jwt.key", "root").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/jwt.key"), "{err}");
    }
}
