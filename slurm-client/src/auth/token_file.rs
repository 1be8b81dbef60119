//! A token read from a file that may be replaced at any time.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use secrecy::{ExposeSecret, SecretString};

use super::{TokenError, TokenFuture, TokenProvider, clean_token};

/// Reads the token from a file, and reads it again whenever the file changes.
///
/// Before every request the file's metadata is checked; its content is re-read only when
/// the modification time, size or inode changed, so a rotated token (a Kubernetes Secret
/// updated in place, a cron job running `scontrol token`) is picked up without a restart.
/// A leading `SLURM_JWT=` and surrounding whitespace are ignored. If the file is found
/// empty while it is being rewritten, the previous token is used until it has content.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    cache: Mutex<Option<Cached>>,
}

#[derive(Debug)]
struct Cached {
    stamp: Stamp,
    token: SecretString,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl TokenFile {
    /// A provider reading `path`. The file is first read on the first request.
    pub fn new(path: impl Into<PathBuf>) -> TokenFile {
        TokenFile {
            path: path.into(),
            cache: Mutex::new(None),
        }
    }

    /// The file this provider reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn read(&self) -> Result<SecretString, TokenError> {
        let meta = tokio::fs::metadata(&self.path)
            .await
            .map_err(|e| self.error("cannot read metadata of", &e))?;
        let stamp = stamp(&meta);
        if let Some(c) = self
            .cache
            .lock()
            .expect("token cache lock")
            .as_ref()
            .filter(|c| c.stamp == stamp)
        {
            return Ok(c.token.clone());
        }
        let raw = SecretString::from(
            tokio::fs::read_to_string(&self.path)
                .await
                .map_err(|e| self.error("cannot read", &e))?,
        );
        let token = clean_token(raw.expose_secret());
        let mut cache = self.cache.lock().expect("token cache lock");
        if token.is_empty() {
            // Probably caught mid-rewrite: keep the old token and look again next time.
            return match cache.as_ref() {
                Some(c) => Ok(c.token.clone()),
                None => Err(TokenError::new(format!(
                    "token file {} is empty",
                    self.path.display()
                ))),
            };
        }
        let token = SecretString::from(token.to_owned());
        *cache = Some(Cached {
            stamp,
            token: token.clone(),
        });
        Ok(token)
    }

    fn error(&self, what: &str, err: &std::io::Error) -> TokenError {
        TokenError::new(format!("{what} token file {}: {err}", self.path.display()))
    }
}

#[cfg(unix)]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    }
}

#[cfg(not(unix))]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: 0,
    }
}

impl TokenProvider for TokenFile {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn token(p: &TokenFile) -> String {
        p.token().await.unwrap().expose_secret().to_owned()
    }

    #[tokio::test]
    async fn rotation_is_picked_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "SLURM_JWT=first.token.aaa\n").unwrap();
        let provider = TokenFile::new(&path);
        assert_eq!(token(&provider).await, "first.token.aaa");
        assert_eq!(token(&provider).await, "first.token.aaa");

        // Replaced atomically, the way a Kubernetes Secret volume is updated.
        let tmp = dir.path().join("token.new");
        std::fs::write(&tmp, "  second.token.bbbb  ").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(token(&provider).await, "second.token.bbbb");

        // Rewritten in place, with a different length.
        std::fs::write(&path, "third.token.c").unwrap();
        assert_eq!(token(&provider).await, "third.token.c");
    }

    #[tokio::test]
    async fn empty_file_mid_rewrite_keeps_previous_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "old.token.x").unwrap();
        let provider = TokenFile::new(&path);
        assert_eq!(token(&provider).await, "old.token.x");
        std::fs::write(&path, "").unwrap();
        assert_eq!(token(&provider).await, "old.token.x");
        std::fs::write(&path, "new.token.yy").unwrap();
        assert_eq!(token(&provider).await, "new.token.yy");
    }

    #[tokio::test]
    async fn missing_or_empty_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope");
        let err = TokenFile::new(&path).token().await.unwrap_err();
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        std::fs::write(&path, "\n").unwrap();
        let err = TokenFile::new(&path).token().await.unwrap_err();
        assert!(err.to_string().contains("is empty"), "{err}");
    }
}
