use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid JSON in {}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("image {reference:?} is not in the store at {} (it has: {})", store.display(), list_or_none(known))]
    NotFound {
        reference: String,
        store: PathBuf,
        known: Vec<String>,
    },
    #[error("invalid image reference {0:?}")]
    InvalidReference(String),
    #[error("blob {digest} in {} is corrupt: its content hashes to {actual}", store.display())]
    DigestMismatch {
        store: PathBuf,
        digest: String,
        actual: String,
    },
    #[error("unsupported {what} {value:?}")]
    Unsupported { what: &'static str, value: String },
    #[error("layer entry {0:?} escapes the target directory")]
    UnsafePath(String),
}

fn list_or_none(known: &[String]) -> String {
    if known.is_empty() {
        "no images".to_owned()
    } else {
        known.join(", ")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches what was being done, and to which path, to an I/O error.
pub(crate) trait IoContext<T> {
    fn ctx(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            action,
            path: path.into(),
            source,
        })
    }
}
