//! Reading the client configuration from environment variables.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::auth::{MintedToken, StaticToken, TokenFile, clean_token};
use crate::builder::ClientBuilder;
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::version::ApiVersion;

/// Builds a [`ClientBuilder`] from variables looked up with `get` (the process environment
/// in production, a map in tests). Empty variables count as unset.
pub(crate) fn builder_from(get: &dyn Fn(&str) -> Option<OsString>) -> Result<ClientBuilder, Error> {
    let var = |name: &str| -> Result<Option<String>, Error> {
        match get(name) {
            None => Ok(None),
            Some(v) => match v.into_string() {
                Ok(s) if s.trim().is_empty() => Ok(None),
                Ok(s) => Ok(Some(s)),
                Err(_) => Err(Error::Config(format!("{name} is not valid UTF-8"))),
            },
        }
    };

    let url = var("SLURM_REST_URL")?.ok_or_else(|| {
        Error::Config(
            "SLURM_REST_URL is not set: set it to the slurmrestd address, e.g. \
             http://127.0.0.1:6820 or unix:/run/slurmrestd/slurmrestd.socket"
                .into(),
        )
    })?;
    let is_unix = matches!(Endpoint::parse(&url, "SLURM_REST_URL")?, Endpoint::Unix(_));
    let mut builder = ClientBuilder::new(url).url_setting("SLURM_REST_URL");

    let user = var("SLURM_USER_NAME")?;
    if let Some(user) = &user {
        builder = builder.user_name(user.clone());
    }

    if let Some(token) = var("SLURM_JWT")? {
        let token = clean_token(&token);
        if token.is_empty() {
            return Err(Error::Config("SLURM_JWT holds no token".into()));
        }
        builder = builder.token(StaticToken::new(token.to_owned()));
    } else if let Some(path) = var("SLURM_JWT_FILE")? {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(Error::Config(format!(
                "SLURM_JWT_FILE is {} but no such file exists",
                path.display()
            )));
        }
        builder = builder.token(TokenFile::new(path));
    } else if let Some(key) = var("SLURM_JWT_KEY")? {
        let Some(user) = &user else {
            return Err(Error::Config(
                "SLURM_JWT_KEY is set but SLURM_USER_NAME is not: minted tokens need the user they stand for".into(),
            ));
        };
        let mut minted = MintedToken::from_key_file(&key, user.clone())
            .map_err(|e| Error::Config(format!("SLURM_JWT_KEY: {e}")))?;
        if let Some(text) = var("SLURM_JWT_LIFESPAN")? {
            let lifespan = crate::parse_duration(&text)
                .map_err(|e| Error::Config(format!("SLURM_JWT_LIFESPAN: {e}")))?;
            minted = minted.lifespan(lifespan);
        }
        builder = builder.token(minted);
    } else if !is_unix {
        return Err(Error::Config(
            "no Slurm token configured: set SLURM_JWT (a token), SLURM_JWT_FILE (a file holding one) \
             or SLURM_JWT_KEY with SLURM_USER_NAME (to mint tokens)"
                .into(),
        ));
    }

    if let Some(v) = var("SLURM_REST_VERSION")? {
        let version: ApiVersion = v
            .parse()
            .map_err(|e| Error::Config(format!("SLURM_REST_VERSION: {e}")))?;
        builder = builder.version(version);
    }
    if let Some(ca) = var("SLURM_REST_CA_FILE")? {
        builder = builder.ca_certificate_file(ca);
    }
    match (
        var("SLURM_REST_CLIENT_CERT")?,
        var("SLURM_REST_CLIENT_KEY")?,
    ) {
        (Some(cert), Some(key)) => builder = builder.client_identity_files(cert, key),
        (None, None) => {}
        (Some(_), None) => {
            return Err(Error::Config(
                "SLURM_REST_CLIENT_CERT is set but SLURM_REST_CLIENT_KEY is not".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(Error::Config(
                "SLURM_REST_CLIENT_KEY is set but SLURM_REST_CLIENT_CERT is not".into(),
            ));
        }
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Result<ClientBuilder, Error> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        builder_from(&move |name| map.get(name).cloned())
    }

    fn config_error(vars: &[(&str, &str)]) -> String {
        match from(vars) {
            Err(Error::Config(msg)) => msg,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn missing_url_names_variable() {
        assert!(config_error(&[]).contains("SLURM_REST_URL is not set"));
        assert!(config_error(&[("SLURM_REST_URL", "localhost:6820")]).contains("SLURM_REST_URL"));
    }

    #[test]
    fn token_is_required_over_tcp_but_not_on_a_socket() {
        let msg = config_error(&[("SLURM_REST_URL", "http://127.0.0.1:6820")]);
        assert!(
            msg.contains("SLURM_JWT")
                && msg.contains("SLURM_JWT_FILE")
                && msg.contains("SLURM_JWT_KEY"),
            "{msg}"
        );
        from(&[("SLURM_REST_URL", "unix:/run/slurmrestd.sock")])
            .unwrap()
            .build()
            .unwrap();
    }

    #[test]
    fn static_token_and_user() {
        let b = from(&[
            ("SLURM_REST_URL", "http://127.0.0.1:6820"),
            ("SLURM_JWT", "SLURM_JWT=abc.def.ghi"),
            ("SLURM_USER_NAME", "root"),
            ("SLURM_REST_VERSION", "v0.0.42"),
        ]);
        let shown = format!("{:?}", b.unwrap());
        assert!(
            shown.contains("root") && shown.contains("V0_0_42"),
            "{shown}"
        );
        assert!(!shown.contains("abc.def.ghi"), "{shown}");
    }

    #[test]
    fn key_needs_user_and_readable_file() {
        let msg = config_error(&[
            ("SLURM_REST_URL", "http://127.0.0.1:1"),
            ("SLURM_JWT_KEY", "/nonexistent/key"),
        ]);
        assert!(msg.contains("SLURM_USER_NAME"), "{msg}");
        let msg = config_error(&[
            ("SLURM_REST_URL", "http://127.0.0.1:1"),
            ("SLURM_JWT_KEY", "/nonexistent/key"),
            ("SLURM_USER_NAME", "root"),
        ]);
        assert!(
            msg.contains("SLURM_JWT_KEY") && msg.contains("/nonexistent/key"),
            "{msg}"
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        let base = [("SLURM_REST_URL", "http://127.0.0.1:1"), ("SLURM_JWT", "t")];
        let with = |extra: (&'static str, &'static str)| {
            let mut v = base.to_vec();
            v.push(extra);
            config_error(&v)
        };
        assert!(with(("SLURM_REST_VERSION", "v9")).contains("SLURM_REST_VERSION"));
        assert!(with(("SLURM_REST_CLIENT_CERT", "/c")).contains("SLURM_REST_CLIENT_KEY"));
        let msg = config_error(&[
            ("SLURM_REST_URL", "http://127.0.0.1:1"),
            ("SLURM_JWT_FILE", "/nonexistent/tok"),
        ]);
        assert!(
            msg.contains("SLURM_JWT_FILE") && msg.contains("/nonexistent/tok"),
            "{msg}"
        );
    }
}
