//! A token fixed at construction.

use secrecy::SecretString;

use super::{TokenFuture, TokenProvider};

/// Always sends the same token (e.g. from `SLURM_JWT`).
#[derive(Debug, Clone)]
pub struct StaticToken {
    token: SecretString,
}

impl StaticToken {
    /// A provider that always returns `token`.
    pub fn new(token: impl Into<SecretString>) -> StaticToken {
        StaticToken {
            token: token.into(),
        }
    }
}

impl TokenProvider for StaticToken {
    fn token(&self) -> TokenFuture<'_> {
        let token = self.token.clone();
        Box::pin(async move { Ok(token) })
    }
}
