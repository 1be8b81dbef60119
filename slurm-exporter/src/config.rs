//! Command-line flags, each also settable through an environment variable.
//!
//! The slurmrestd connection uses the same variables as `slurm_client::Client::from_env`
//! (`SLURM_REST_URL`, `SLURM_JWT`, …); the exporter's own settings start with
//! `SLURM_EXPORTER_`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use secrecy::SecretString;

use crate::sources::SourceKind;

/// Prometheus exporter for Slurm, reading slurmrestd once per interval and serving every
/// scrape from the last complete snapshot.
#[derive(Parser, Debug)]
#[command(name = "slurm-exporter", version, about)]
pub struct Config {
    /// slurmrestd address: http://host:port, https://host:port or unix:/path/to/socket.
    #[arg(long, env = "SLURM_REST_URL")]
    pub slurm_url: String,

    /// A Slurm JWT (as printed by `scontrol token`). Prefer the variable or a file: command
    /// lines are visible to other users. Takes precedence over --jwt-file and --jwt-key.
    #[arg(long, env = "SLURM_JWT", hide_env_values = true)]
    pub jwt: Option<SecretString>,

    /// A file holding the JWT, re-read whenever it changes (e.g. a mounted Secret).
    #[arg(long, env = "SLURM_JWT_FILE")]
    pub jwt_file: Option<PathBuf>,

    /// The cluster's HS256 key file (jwt_hs256.key): tokens for --user-name are minted locally.
    #[arg(long, env = "SLURM_JWT_KEY")]
    pub jwt_key: Option<PathBuf>,

    /// Lifespan of minted tokens.
    #[arg(long, env = "SLURM_JWT_LIFESPAN", value_parser = parse_duration, default_value = "30m")]
    pub jwt_lifespan: Duration,

    /// Sent as X-SLURM-USER-NAME; the user minted tokens stand for.
    #[arg(long, env = "SLURM_USER_NAME")]
    pub user_name: Option<String>,

    /// Pin a REST version (e.g. v0.0.42) instead of using the newest one served.
    #[arg(long, env = "SLURM_REST_VERSION")]
    pub rest_version: Option<String>,

    /// Extra CA certificate(s) (PEM) for an https:// slurmrestd.
    #[arg(long, env = "SLURM_REST_CA_FILE")]
    pub rest_ca_file: Option<PathBuf>,

    /// Client certificate (PEM) presented to slurmrestd; needs --rest-client-key.
    #[arg(long, env = "SLURM_REST_CLIENT_CERT", requires = "rest_client_key")]
    pub rest_client_cert: Option<PathBuf>,

    /// Private key (PEM) of --rest-client-cert.
    #[arg(long, env = "SLURM_REST_CLIENT_KEY", requires = "rest_client_cert")]
    pub rest_client_key: Option<PathBuf>,

    /// How often the collection loop runs (e.g. 30s, 1m, 500ms).
    #[arg(long, env = "SLURM_EXPORTER_INTERVAL", value_parser = parse_duration, default_value = "30s")]
    pub interval: Duration,

    /// Default time limit of one source's collection.
    #[arg(long, env = "SLURM_EXPORTER_TIMEOUT", value_parser = parse_duration, default_value = "20s")]
    pub timeout: Duration,

    /// Per-source time limits overriding --timeout, e.g. `jobs=45s,diag=5s`. The default gives
    /// the full job listing 2 minutes: slurmrestd takes about 45 s for 20,000 jobs (155 MB).
    #[arg(long, env = "SLURM_EXPORTER_SOURCE_TIMEOUTS", value_parser = parse_source_timeouts, default_value = "jobs=2m")]
    pub source_timeouts: SourceTimeouts,

    /// Nodes and jobs are listed "only if changed" (slurmctld then answers almost nothing
    /// on an idle cluster); a full listing is still made at least this often, since node
    /// load and free memory change without marking the list changed.
    #[arg(long, env = "SLURM_EXPORTER_FULL_REFRESH", value_parser = parse_duration, default_value = "5m")]
    pub full_refresh: Duration,

    /// Most requests to slurmrestd in flight at once, over all sources.
    #[arg(long, env = "SLURM_EXPORTER_MAX_IN_FLIGHT", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_in_flight: u16,

    /// Sources to collect, comma-separated.
    #[arg(
        long,
        env = "SLURM_EXPORTER_SOURCES",
        value_delimiter = ',',
        default_value = "diag,nodes,jobs,partitions,reservations,licenses,shares,qos,associations"
    )]
    pub sources: Vec<SourceKind>,

    /// Address to serve /metrics, /healthz and /readyz on.
    #[arg(long, env = "SLURM_EXPORTER_LISTEN", default_value = "0.0.0.0:9341")]
    pub listen: SocketAddr,

    /// TLS certificate chain (PEM) for the HTTP endpoint; needs --tls-key.
    #[arg(long, env = "SLURM_EXPORTER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM) for the HTTP endpoint.
    #[arg(long, env = "SLURM_EXPORTER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// User name required on /metrics (HTTP basic auth); needs --basic-auth-password-file.
    #[arg(
        long,
        env = "SLURM_EXPORTER_BASIC_AUTH_USER",
        requires = "basic_auth_password_file"
    )]
    pub basic_auth_user: Option<String>,

    /// File holding the basic-auth password (surrounding whitespace is ignored).
    #[arg(
        long,
        env = "SLURM_EXPORTER_BASIC_AUTH_PASSWORD_FILE",
        requires = "basic_auth_user"
    )]
    pub basic_auth_password_file: Option<PathBuf>,

    /// Log format.
    #[arg(long, env = "SLURM_EXPORTER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `slurm_exporter=debug`.
    #[arg(long, env = "SLURM_EXPORTER_LOG", default_value = "info")]
    pub log: String,
}

/// How logs are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Per-source timeouts from `--source-timeouts`.
#[derive(Clone, Debug, Default)]
pub struct SourceTimeouts(pub BTreeMap<SourceKind, Duration>);

impl Config {
    /// The time limit of one source.
    pub fn timeout_of(&self, source: SourceKind) -> Duration {
        self.source_timeouts
            .0
            .get(&source)
            .copied()
            .unwrap_or(self.timeout)
    }

    /// The enabled sources, each once, in a fixed order.
    pub fn enabled_sources(&self) -> Vec<SourceKind> {
        let mut s = self.sources.clone();
        s.sort();
        s.dedup();
        s
    }
}

pub use slurm_client::parse_duration;

fn parse_source_timeouts(text: &str) -> Result<SourceTimeouts, String> {
    let mut map = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not SOURCE=DURATION (e.g. jobs=45s)"))?;
        let source = SourceKind::from_str(name.trim(), true)
            .map_err(|_| format!("{part:?}: unknown source {:?}", name.trim()))?;
        map.insert(source, parse_duration(value).map_err(|e| e.to_string())?);
    }
    Ok(SourceTimeouts(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, clap::Error> {
        let mut all = vec!["slurm-exporter", "--slurm-url", "http://127.0.0.1:1"];
        all.extend_from_slice(args);
        Config::try_parse_from(all)
    }

    #[test]
    fn the_job_listing_gets_longer_by_default() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.timeout_of(SourceKind::Jobs), Duration::from_secs(120));
        assert_eq!(c.timeout_of(SourceKind::Nodes), Duration::from_secs(20));
    }

    #[test]
    fn source_timeouts_and_sources() {
        let c = parse(&[
            "--source-timeouts",
            "jobs=45s, diag=5s",
            "--sources",
            "jobs,diag,jobs",
            "--timeout",
            "10s",
        ])
        .unwrap();
        assert_eq!(c.timeout_of(SourceKind::Jobs), Duration::from_secs(45));
        assert_eq!(c.timeout_of(SourceKind::Nodes), Duration::from_secs(10));
        assert_eq!(
            c.enabled_sources(),
            vec![SourceKind::Diag, SourceKind::Jobs]
        );
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse(&["--source-timeouts", "gpus=5s"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown source \"gpus\""), "{e}");
        let e = parse(&["--sources", "diag,bogus"]).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = parse(&["--max-in-flight", "0"]).unwrap_err().to_string();
        assert!(e.contains("max-in-flight"), "{e}");
        let e = parse(&["--tls-cert", "/c.pem"]).unwrap_err().to_string();
        assert!(e.contains("--tls-key"), "{e}");
    }

    #[test]
    fn token_is_not_in_debug_output() {
        let c = parse(&["--jwt", "secret.token.value"]).unwrap();
        assert!(!format!("{c:?}").contains("secret.token.value"));
    }
}
