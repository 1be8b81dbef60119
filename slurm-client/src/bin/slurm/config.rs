//! The connection flags and the client built from them.
//!
//! Every flag falls back to the variable `slurm_client::Client::from_env` reads, so the
//! tool and the library are configured alike; a flag given on the command line wins.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use slurm_client::{ApiVersion, Client, ClientBuilder, Error, MintedToken, StaticToken, TokenFile};

use crate::format::parse_duration;

/// How to reach and authenticate to slurmrestd.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Connection")]
pub struct Connection {
    /// slurmrestd address: http://host:port, https://host:port or unix:/path/to/socket.
    #[arg(long, global = true, env = "SLURM_REST_URL", value_name = "URL")]
    pub url: Option<String>,

    /// Pin the REST version (e.g. v0.0.42) instead of the newest one both sides know.
    #[arg(
        long,
        global = true,
        env = "SLURM_REST_VERSION",
        value_name = "VERSION"
    )]
    pub rest_version: Option<ApiVersion>,

    /// User name sent as X-SLURM-USER-NAME; the user tokens minted with --jwt-key stand for.
    #[arg(long, global = true, env = "SLURM_USER_NAME", value_name = "USER")]
    pub user: Option<String>,

    /// File holding the JWT, re-read when it changes [default: $SLURM_JWT_FILE].
    #[arg(long, global = true, value_name = "FILE")]
    pub jwt_file: Option<PathBuf>,

    /// The cluster's HS256 key file: tokens for --user are minted locally
    /// [default: $SLURM_JWT_KEY].
    #[arg(long, global = true, value_name = "FILE")]
    pub jwt_key: Option<PathBuf>,

    /// Extra CA certificate(s), PEM, for an https:// slurmrestd.
    #[arg(long, global = true, env = "SLURM_REST_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,

    /// Client certificate (PEM) presented to slurmrestd; needs --client-key.
    #[arg(
        long,
        global = true,
        env = "SLURM_REST_CLIENT_CERT",
        value_name = "FILE"
    )]
    pub client_cert: Option<PathBuf>,

    /// Private key (PEM) of --client-cert.
    #[arg(
        long,
        global = true,
        env = "SLURM_REST_CLIENT_KEY",
        value_name = "FILE"
    )]
    pub client_key: Option<PathBuf>,

    /// Time limit of each request (e.g. 30s, 2m).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub timeout: Duration,
}

impl Connection {
    /// A client for these settings. Nothing is sent yet.
    pub fn client(&self) -> Result<Client, Error> {
        let url = self
            .url
            .clone()
            .filter(|u| !u.trim().is_empty())
            .ok_or_else(|| {
                Error::Config(
                    "no slurmrestd address: pass --url or set SLURM_REST_URL \
                 (e.g. http://127.0.0.1:6820 or unix:/run/slurmrestd/slurmrestd.socket)"
                        .into(),
                )
            })?;
        let is_unix = url.trim_start().starts_with("unix:");
        let mut builder = ClientBuilder::new(url)
            .request_timeout(self.timeout)
            .connect_timeout(self.timeout.min(ClientBuilder::DEFAULT_CONNECT_TIMEOUT));
        if let Some(user) = &self.user {
            builder = builder.user_name(user.clone());
        }
        builder = self.with_token(builder, is_unix)?;
        if let Some(version) = self.rest_version {
            builder = builder.version(version);
        }
        if let Some(ca) = &self.ca_file {
            builder = builder.ca_certificate_file(ca);
        }
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => builder = builder.client_identity_files(cert, key),
            (None, None) => {}
            (Some(_), None) => {
                return Err(Error::Config(
                    "--client-cert (SLURM_REST_CLIENT_CERT) needs --client-key (SLURM_REST_CLIENT_KEY)".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(Error::Config(
                    "--client-key (SLURM_REST_CLIENT_KEY) needs --client-cert (SLURM_REST_CLIENT_CERT)".into(),
                ));
            }
        }
        builder.build()
    }

    /// Picks the token source: a flag, else SLURM_JWT, SLURM_JWT_FILE, SLURM_JWT_KEY.
    fn with_token(&self, builder: ClientBuilder, is_unix: bool) -> Result<ClientBuilder, Error> {
        if let Some(path) = &self.jwt_file {
            return token_file(builder, path.clone(), "--jwt-file");
        }
        if let Some(key) = &self.jwt_key {
            return self.minted(builder, key.clone(), "--jwt-key");
        }
        if let Some(token) = var("SLURM_JWT")? {
            let token = token
                .trim()
                .trim_start_matches("SLURM_JWT=")
                .trim()
                .to_string();
            if token.is_empty() {
                return Err(Error::Config("SLURM_JWT holds no token".into()));
            }
            return Ok(builder.token(StaticToken::new(token)));
        }
        if let Some(path) = var("SLURM_JWT_FILE")? {
            return token_file(builder, path.into(), "SLURM_JWT_FILE");
        }
        if let Some(key) = var("SLURM_JWT_KEY")? {
            return self.minted(builder, key.into(), "SLURM_JWT_KEY");
        }
        if is_unix {
            return Ok(builder);
        }
        Err(Error::Config(
            "no Slurm token: set SLURM_JWT (e.g. SLURM_JWT=$(slurm token --key KEYFILE --user USER)), \
             or pass --jwt-file/--jwt-key (SLURM_JWT_FILE/SLURM_JWT_KEY)"
                .into(),
        ))
    }

    fn minted(
        &self,
        builder: ClientBuilder,
        key: PathBuf,
        what: &str,
    ) -> Result<ClientBuilder, Error> {
        let Some(user) = &self.user else {
            return Err(Error::Config(format!(
                "{what} mints tokens, which need a user: pass --user or set SLURM_USER_NAME"
            )));
        };
        let mut minted = MintedToken::from_key_file(&key, user.clone())?;
        if let Some(text) = var("SLURM_JWT_LIFESPAN")? {
            let lifespan = parse_duration(&text)
                .map_err(|e| Error::Config(format!("SLURM_JWT_LIFESPAN: {e}")))?;
            minted = minted.lifespan(lifespan);
        }
        Ok(builder.token(minted))
    }
}

fn token_file(builder: ClientBuilder, path: PathBuf, what: &str) -> Result<ClientBuilder, Error> {
    if !path.is_file() {
        return Err(Error::Config(format!(
            "{what}: no such file {}",
            path.display()
        )));
    }
    Ok(builder.token(TokenFile::new(path)))
}

/// An environment variable; empty counts as unset.
fn var(name: &str) -> Result<Option<String>, Error> {
    match std::env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Error::Config(format!("{name} is not valid UTF-8")))
        }
    }
}
