//! `slurm token`: mint a JWT locally, like `scontrol token`, from the cluster's key.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use secrecy::ExposeSecret;
use slurm_client::{JwtClaims, mint_hs256};

use crate::cmd::Context;
use crate::exit::usage;
use crate::format::parse_duration;

/// Prints only the token, for `export SLURM_JWT=$(slurm token --key FILE --user U)`.
/// Needs no server. Whoever holds the key can act as any user: keep it private.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The cluster's HS256 key file (jwt_hs256.key) [default: --jwt-key or $SLURM_JWT_KEY].
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,

    /// How long the token is valid (e.g. 30m, 1h, 1d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30m")]
    lifespan: Duration,
}

pub fn run(ctx: &Context, args: Args) -> anyhow::Result<()> {
    let key_path = args
        .key
        .or_else(|| ctx.connection.jwt_key.clone())
        .or_else(|| {
            std::env::var_os("SLURM_JWT_KEY")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or_else(|| {
            usage("no key: pass --key FILE (the cluster's jwt_hs256.key) or set SLURM_JWT_KEY")
        })?;
    let user = ctx
        .connection
        .user
        .clone()
        .ok_or_else(|| usage("no user: pass --user NAME or set SLURM_USER_NAME"))?;
    let key = std::fs::read(&key_path)
        .with_context(|| format!("cannot read key file {}", key_path.display()))
        .map_err(|e| usage(format!("{e:#}")))?;
    if key.is_empty() {
        return Err(usage(format!("key file {} is empty", key_path.display())));
    }
    let iat = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_secs();
    let claims = JwtClaims::new(user, Duration::ZERO)
        .issued_at(iat)
        .expires_at(iat + args.lifespan.as_secs().max(1));
    let token = mint_hs256(&key, &claims);
    crate::output::print(&format!("{}\n", token.expose_secret()))
}
