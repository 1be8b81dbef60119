//! The slurmrestd client, configured from the exporter's flags.

use std::time::Duration;

use anyhow::{Context, bail};
use secrecy::{ExposeSecret, SecretString};
use slurm_client::{Client, ClientBuilder, MintedToken, StaticToken, TokenFile};

use crate::config::Config;

/// Builds the client. The token source is the first of --jwt, --jwt-file and --jwt-key
/// that is set; none is needed on a Unix socket served with `rest_auth/local`.
pub fn client(config: &Config) -> anyhow::Result<Client> {
    let mut builder = ClientBuilder::new(config.slurm_url.clone())
        .user_agent(concat!("slurm-exporter/", env!("CARGO_PKG_VERSION")))
        // The sources enforce their own time limits; this only bounds a single request.
        .request_timeout(longest_timeout(config));
    if let Some(user) = &config.user_name {
        builder = builder.user_name(user.clone());
    }
    if let Some(token) = &config.jwt {
        let token = clean_token(token.expose_secret());
        if token.is_empty() {
            bail!("SLURM_JWT / --jwt holds no token");
        }
        builder = builder.token(StaticToken::new(SecretString::from(token.to_owned())));
    } else if let Some(path) = &config.jwt_file {
        if !path.is_file() {
            bail!(
                "--jwt-file / SLURM_JWT_FILE: {} is not a file",
                path.display()
            );
        }
        builder = builder.token(TokenFile::new(path.clone()));
    } else if let Some(key) = &config.jwt_key {
        let Some(user) = &config.user_name else {
            bail!(
                "--jwt-key / SLURM_JWT_KEY needs --user-name / SLURM_USER_NAME: the user minted tokens stand for"
            );
        };
        let minted = MintedToken::from_key_file(key, user.clone())
            .with_context(|| format!("--jwt-key / SLURM_JWT_KEY {}", key.display()))?
            .lifespan(config.jwt_lifespan);
        builder = builder.token(minted);
    } else if !config.slurm_url.starts_with("unix:") {
        bail!(
            "no Slurm token configured: set SLURM_JWT (a token), SLURM_JWT_FILE (a file holding one) \
             or SLURM_JWT_KEY with SLURM_USER_NAME (to mint tokens)"
        );
    }
    if let Some(v) = &config.rest_version {
        let version = v
            .parse()
            .map_err(|e| anyhow::anyhow!("--rest-version / SLURM_REST_VERSION {v:?}: {e}"))?;
        builder = builder.version(version);
    }
    if let Some(ca) = &config.rest_ca_file {
        builder = builder.ca_certificate_file(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&config.rest_client_cert, &config.rest_client_key) {
        builder = builder.client_identity_files(cert.clone(), key.clone());
    }
    builder
        .build()
        .context("cannot configure the slurmrestd client")
}

fn longest_timeout(config: &Config) -> Duration {
    config
        .source_timeouts
        .0
        .values()
        .copied()
        .chain([config.timeout])
        .max()
        .unwrap_or(config.timeout)
}

/// Removes whitespace and the `SLURM_JWT=` prefix `scontrol token` prints.
fn clean_token(raw: &str) -> &str {
    let t = raw.trim();
    t.strip_prefix("SLURM_JWT=").map(str::trim).unwrap_or(t)
}
