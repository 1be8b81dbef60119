//! Authentication: where the JWT sent as `X-SLURM-USER-TOKEN` comes from.
//!
//! The client asks its [`TokenProvider`] for a token before every request, so a provider
//! can rotate tokens without the client noticing. Three providers are built in:
//! [`StaticToken`] (a fixed token), [`TokenFile`] (a file re-read when it changes, e.g. a
//! mounted Kubernetes Secret) and [`MintedToken`] (tokens signed locally with the cluster's
//! HS256 key).

mod jwt;
mod minted;
mod static_token;
mod token_file;

use std::future::Future;
use std::pin::Pin;

use secrecy::SecretString;

pub use jwt::{JwtClaims, JwtError, mint_hs256, verify_hs256};
pub use minted::MintedToken;
pub use static_token::StaticToken;
pub use token_file::TokenFile;

/// The future a [`TokenProvider`] returns.
pub type TokenFuture<'a> =
    Pin<Box<dyn Future<Output = Result<SecretString, TokenError>> + Send + 'a>>;

/// A source of Slurm JWTs, asked once per request (including each retry).
///
/// Implementations must be cheap when the token has not changed, and must never put the
/// token into their `Debug` output or errors.
pub trait TokenProvider: Send + Sync + std::fmt::Debug {
    /// The token to send with the next request.
    fn token(&self) -> TokenFuture<'_>;
}

/// Why a [`TokenProvider`] could not produce a token. Never contains the token itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TokenError {
    message: String,
}

impl TokenError {
    /// A token error with this explanation (which must not contain any secret).
    pub fn new(message: impl Into<String>) -> TokenError {
        TokenError {
            message: message.into(),
        }
    }
}

/// Cleans up token text read from a file or variable: surrounding whitespace and a
/// leading `SLURM_JWT=` (the form `scontrol token` prints) are removed.
pub(crate) fn clean_token(raw: &str) -> &str {
    let t = raw.trim();
    t.strip_prefix("SLURM_JWT=").map(str::trim).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::clean_token;

    #[test]
    fn clean_token_strips_prefix_and_whitespace() {
        assert_eq!(clean_token("  abc.def.ghi\n"), "abc.def.ghi");
        assert_eq!(clean_token("SLURM_JWT=abc.def.ghi\n"), "abc.def.ghi");
        assert_eq!(clean_token("\n"), "");
    }
}
