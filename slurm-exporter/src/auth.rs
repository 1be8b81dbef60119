//! HTTP basic auth for `/metrics`.

use std::path::Path;

use anyhow::{Context, bail};
use axum::http::HeaderValue;
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};

/// The one user and password allowed.
pub struct BasicAuth {
    user: String,
    password: SecretString,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("user", &self.user)
            .field("password", &"[REDACTED]")
            .finish()
    }
}

impl BasicAuth {
    /// A user and the password read from `password_file` (surrounding whitespace removed).
    pub fn from_file(user: String, password_file: &Path) -> anyhow::Result<BasicAuth> {
        let text = std::fs::read_to_string(password_file).with_context(|| {
            format!(
                "cannot read the basic-auth password file {}",
                password_file.display()
            )
        })?;
        let password = text.trim();
        if password.is_empty() {
            bail!(
                "the basic-auth password file {} is empty",
                password_file.display()
            );
        }
        if user.is_empty() || user.contains(':') {
            bail!("the basic-auth user must be non-empty and contain no ':'");
        }
        Ok(BasicAuth {
            user,
            password: SecretString::from(password.to_owned()),
        })
    }

    /// Whether an `Authorization` header carries the right user and password.
    pub fn allows(&self, header: Option<&HeaderValue>) -> bool {
        let Some(encoded) = header.and_then(|h| h.to_str().ok()).and_then(|h| {
            h.strip_prefix("Basic ")
                .or_else(|| h.strip_prefix("basic "))
        }) else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Some(colon) = decoded.iter().position(|b| *b == b':') else {
            return false;
        };
        let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
        // Both compared in full, so the time taken does not tell which one was wrong.
        let user_ok = constant_time_eq(user, self.user.as_bytes());
        let password_ok = constant_time_eq(password, self.password.expose_secret().as_bytes());
        user_ok & password_ok
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user_pass: &str) -> HeaderValue {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pass);
        HeaderValue::from_str(&format!("Basic {b64}")).unwrap()
    }

    #[test]
    fn checks_user_and_password() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret:with:colons\n").unwrap();
        let auth = BasicAuth::from_file("prom".into(), &file).unwrap();
        assert!(auth.allows(Some(&header("prom:s3cret:with:colons"))));
        assert!(!auth.allows(Some(&header("prom:s3cret"))));
        assert!(!auth.allows(Some(&header("other:s3cret:with:colons"))));
        assert!(!auth.allows(Some(&HeaderValue::from_static("Bearer x"))));
        assert!(!auth.allows(None));
        assert!(!format!("{auth:?}").contains("s3cret"));
    }

    #[test]
    fn empty_password_file_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "\n").unwrap();
        let e = BasicAuth::from_file("prom".into(), &file).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }
}
