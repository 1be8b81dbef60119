//! Mints a Slurm JWT from the cluster's HS256 key, like `scontrol token`, and prints it the
//! same way (`SLURM_JWT=…` on stdout). With `SLURM_REST_URL` set, it then proves the token
//! works by pinging slurmctld through slurmrestd with it (reported on stderr).
//!
//! ```sh
//! set -a; . /run/slurm-dev/26.05/cluster.env; set +a   # SLURM_JWT_KEY, SLURM_USER_NAME, SLURM_REST_URL
//! cargo run -p slurm-client --example mint_token [-- [KEY_FILE] [--user NAME] [--lifespan 30m]]
//! export $(cargo run -q -p slurm-client --example mint_token)   # a fresh SLURM_JWT
//! ```
//!
//! The key file defaults to `$SLURM_JWT_KEY`, the user to `$SLURM_USER_NAME` (else `$USER`).
//! Whoever holds the key can act as any user, root included: keep it as private as slurmctld's.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use slurm_client::secrecy::ExposeSecret;
use slurm_client::{Client, MintedToken, StaticToken};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut key = env("SLURM_JWT_KEY").map(PathBuf::from);
    let mut user = env("SLURM_USER_NAME").or_else(|| env("USER"));
    let mut lifespan = MintedToken::DEFAULT_LIFESPAN;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--user" => user = Some(value("--user")?),
            // `1800`, `30m`, `2h`, … as for SLURM_JWT_LIFESPAN.
            "--lifespan" => lifespan = slurm_client::parse_duration(&value("--lifespan")?)?,
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}").into()),
            path => key = Some(PathBuf::from(path)),
        }
    }
    let key = key.ok_or("no key file: pass the cluster's jwt_hs256.key or set SLURM_JWT_KEY")?;
    let user = user.ok_or("no user: pass --user NAME or set SLURM_USER_NAME")?;

    let minter = MintedToken::from_key_file(&key, user.as_str())?.lifespan(lifespan);
    let token = minter.mint_at(SystemTime::now())?;
    // The one line `scontrol token` prints: `export $(…)` or `eval` it.
    println!("SLURM_JWT={}", token.expose_secret());
    eprintln!(
        "minted a token for {user}, valid for {}",
        humanize(lifespan)
    );

    let Some(url) = env("SLURM_REST_URL") else {
        return Ok(());
    };
    let mut builder = Client::builder(url).token(StaticToken::new(token));
    if let Some(ca) = env("SLURM_REST_CA_FILE") {
        builder = builder.ca_certificate_file(ca);
    }
    let client = builder.build()?;
    let negotiated = client.negotiate().await?;
    let ping = client.ping().await?.value;
    if !ping.any_responding() {
        // slurmrestd answers a ping whether or not slurmctld accepted the token: an
        // authenticated request tells a refused token from a controller that is down.
        client.licenses().await?;
        return Err("slurmrestd answered, but no slurmctld responds".into());
    }
    eprintln!(
        "the token works: {} answered a ping (Slurm {}, REST {})",
        client.endpoint(),
        negotiated.release.as_deref().unwrap_or("?"),
        negotiated.version
    );
    Ok(())
}

/// `30m`, `1h30m`, `45s`.
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        _ => format!("{s}s"),
    }
}
