//! `slurm get PATH`: the escape hatch for anything the other commands do not cover.

use crate::cmd::Context;

/// Prints the JSON answer as the server sent it (whatever --output says).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Path with optional query, e.g. /slurm/v0.0.42/diag or '/slurm/{version}/jobs?flags=ALL';
    /// `{version}` becomes the negotiated REST version.
    #[arg(value_name = "PATH")]
    path: String,
}

pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let path = if args.path.contains("{version}") {
        let version = client.version().await?;
        args.path.replace("{version}", version.as_str())
    } else {
        args.path
    };
    let value = client.get_json(&path).await?;
    crate::output::json(&value)
}
