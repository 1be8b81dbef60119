//! Where slurmrestd listens: an `http://` or `https://` URL, or a `unix:` socket path.

use std::fmt;
use std::path::PathBuf;

use url::Url;

use crate::error::Error;

/// A parsed server address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// TCP, with or without TLS. The URL may carry a path prefix (e.g. behind a proxy).
    Tcp(Url),
    /// A Unix domain socket; requests are sent as `http://localhost/...` over it.
    Unix(PathBuf),
}

impl Endpoint {
    /// Parses `http://host:port[/prefix]`, `https://…` or `unix:/path/to/socket`
    /// (also `unix:///path`). `what` names the setting in error messages.
    pub fn parse(text: &str, what: &str) -> Result<Endpoint, Error> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(Error::Config(format!(
                    "{what} {text:?} has no socket path: expected unix:/path/to/slurmrestd.socket"
                )));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        let url = Url::parse(text).map_err(|e| {
            Error::Config(format!(
                "{what} {text:?} is not a valid URL ({e}): expected http://host:port, https://host:port or unix:/path"
            ))
        })?;
        match url.scheme() {
            "http" | "https" if url.host().is_some() => {}
            "http" | "https" => {
                return Err(Error::Config(format!("{what} {text:?} has no host")));
            }
            other => {
                return Err(Error::Config(format!(
                    "{what} {text:?} has unsupported scheme {other:?}: use http, https or unix"
                )));
            }
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Error::Config(format!(
                "{what} must not contain credentials; use a token provider instead"
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(Error::Config(format!(
                "{what} {text:?} must not contain a query or fragment"
            )));
        }
        Ok(Endpoint::Tcp(url))
    }

    /// The URL that request paths are appended to.
    pub fn base_url(&self) -> Url {
        match self {
            Endpoint::Tcp(url) => url.clone(),
            Endpoint::Unix(_) => Url::parse("http://localhost/").expect("static URL"),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(url) => write!(f, "{url}"),
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// Joins a base URL and a request path (`/slurm/...`), keeping any prefix of the base.
pub(crate) fn join(base: &Url, path: &str, query: &[(String, Option<String>)]) -> Url {
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    let path = path.trim_start_matches('/');
    url.set_path(&format!("{prefix}/{path}"));
    if !query.is_empty() {
        let mut pairs = url.query_pairs_mut();
        for (key, value) in query {
            match value {
                Some(value) => pairs.append_pair(key, value),
                None => pairs.append_key_only(key),
            };
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert!(matches!(
            Endpoint::parse("http://127.0.0.1:6820", "URL"),
            Ok(Endpoint::Tcp(_))
        ));
        let e = Endpoint::parse("https://slurm.example:6820/api/", "URL").unwrap();
        assert_eq!(e.base_url().path(), "/api/");
        assert_eq!(
            Endpoint::parse("unix:/run/slurmrestd.sock", "URL").unwrap(),
            Endpoint::Unix("/run/slurmrestd.sock".into())
        );
        assert_eq!(
            Endpoint::parse("unix:///run/slurmrestd.sock", "URL").unwrap(),
            Endpoint::Unix("/run/slurmrestd.sock".into())
        );
    }

    #[test]
    fn bad_urls_name_the_setting() {
        for bad in ["", "127.0.0.1:6820", "ftp://x", "unix:", "http://u:p@h:1"] {
            let err = Endpoint::parse(bad, "SLURM_REST_URL")
                .unwrap_err()
                .to_string();
            assert!(err.contains("SLURM_REST_URL"), "{bad}: {err}");
        }
    }

    #[test]
    fn join_keeps_prefix_and_adds_query() {
        let base = Url::parse("http://h:1/prefix/").unwrap();
        let q = vec![
            ("update_time".to_string(), Some("5".to_string())),
            ("with_assocs".to_string(), None),
        ];
        assert_eq!(
            join(&base, "/slurm/v0.0.42/jobs", &q).as_str(),
            "http://h:1/prefix/slurm/v0.0.42/jobs?update_time=5&with_assocs"
        );
        let base = Url::parse("http://h:1").unwrap();
        assert_eq!(
            join(&base, "/slurm/v0.0.42/node/n%5B1%5D", &[]).as_str(),
            "http://h:1/slurm/v0.0.42/node/n%5B1%5D"
        );
    }
}
