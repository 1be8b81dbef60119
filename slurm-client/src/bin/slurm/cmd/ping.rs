//! `slurm ping`: are slurmrestd and slurmctld there, which REST version and Slurm release.

use serde::Serialize;
use slurm_client::ControllerPing;

use crate::cmd::Context;
use crate::exit::{UNREACHABLE, failure};
use crate::output::{self, emit};
use crate::table::{Details, Table};

/// Exits 0 when slurmrestd answers and a slurmctld responds; a rejected token gives exit
/// code 3 (slurmrestd then reports the controller down). JSON fields: url, rest_version,
/// release, cluster, served_versions, controllers (ControllerPing objects).
#[derive(clap::Args, Debug)]
pub struct Args {}

#[derive(Debug, Serialize)]
struct PingReport {
    url: String,
    rest_version: String,
    release: Option<String>,
    cluster: Option<String>,
    served_versions: Vec<String>,
    controllers: Vec<ControllerPing>,
}

pub async fn run(ctx: &Context, _args: Args) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let negotiated = client.negotiate().await?;
    let served = client.served_versions().await?;
    let response = client.ping().await?;
    output::warnings(&response.warnings);
    let ping = response.value;
    if !ping.any_responding() {
        // slurmrestd answers a ping even when slurmctld does not talk to it, including
        // when slurmctld refuses the token: an authenticated request tells which it is.
        client.licenses().await?;
    }
    let report = PingReport {
        url: client.endpoint(),
        rest_version: negotiated.version.to_string(),
        release: negotiated.release,
        cluster: negotiated.cluster,
        served_versions: served.iter().map(ToString::to_string).collect(),
        controllers: ping.controllers,
    };
    emit(ctx.output, &report, |p| {
        let mut d = Details::new();
        d.add("slurmrestd", p.url.clone())
            .add("Slurm", p.release.clone().unwrap_or_default())
            .add("Cluster", p.cluster.clone().unwrap_or_default())
            .add("REST version", p.rest_version.clone())
            .add("Served", p.served_versions.join(" "));
        let mut t = Table::new(&["SLURMCTLD", "MODE", "STATUS", "LATENCY"]);
        for c in &p.controllers {
            t.row(vec![
                c.hostname.clone(),
                c.mode.clone().unwrap_or_default(),
                if c.responding { "UP" } else { "DOWN" }.into(),
                c.latency_us
                    .map(|us| format!("{:.1}ms", us as f64 / 1000.0))
                    .unwrap_or_default(),
            ]);
        }
        format!("{}\n{}", d.render(), t.render())
    })?;
    if !report.controllers.iter().any(|c| c.responding) {
        return Err(failure(UNREACHABLE, "no slurmctld responds"));
    }
    Ok(())
}
