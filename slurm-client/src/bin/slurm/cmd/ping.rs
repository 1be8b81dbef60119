//! `slurm ping`: are slurmrestd and slurmctld there, which REST version and Slurm release.

use serde::Serialize;
use serde_json::Value;
use slurm_client::Client;

use crate::cmd::Context;
use crate::exit::{UNREACHABLE, failure};
use crate::output::emit;
use crate::table::{Details, Table};

/// Exits 0 when slurmrestd answers and every slurmctld responds; a rejected token gives
/// exit code 3 (slurmrestd reports the controller down then). JSON fields: url,
/// rest_version, release, cluster, served_versions, controllers[] (hostname, mode,
/// responding, latency_us).
#[derive(clap::Args, Debug)]
pub struct Args {}

#[derive(Debug, Serialize)]
struct Ping {
    url: String,
    rest_version: String,
    release: Option<String>,
    cluster: Option<String>,
    served_versions: Vec<String>,
    controllers: Vec<Controller>,
}

#[derive(Debug, Serialize)]
struct Controller {
    hostname: String,
    mode: Option<String>,
    responding: bool,
    latency_us: Option<u64>,
}

pub async fn run(ctx: &Context, _args: Args) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let negotiated = client.negotiate().await?;
    let served = client.served_versions().await?;
    let answer = client
        .get_json(&format!("/slurm/{}/ping", negotiated.version))
        .await?;
    let controllers = controllers(&answer);
    if controllers.iter().any(|c| !c.responding) {
        // slurmrestd answers a ping even when it cannot talk to slurmctld, including when
        // slurmctld refuses the token: an authenticated request tells which it is.
        explain_down(&client, &negotiated.version.to_string()).await?;
    }
    let ping = Ping {
        url: client.endpoint(),
        rest_version: negotiated.version.to_string(),
        release: negotiated.release,
        cluster: negotiated.cluster,
        served_versions: served.iter().map(ToString::to_string).collect(),
        controllers,
    };
    emit(ctx.output, &ping, |p| {
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
    if ping.controllers.iter().any(|c| !c.responding) {
        return Err(failure(UNREACHABLE, "slurmctld does not respond"));
    }
    Ok(())
}

/// The `pings[]` of a ping answer. Read as plain JSON: every REST version names these
/// fields alike (`responding` appeared in v0.0.41; before, `pinged` is "UP" or "DOWN").
fn controllers(answer: &Value) -> Vec<Controller> {
    let Some(pings) = answer.get("pings").and_then(Value::as_array) else {
        return Vec::new();
    };
    pings
        .iter()
        .map(|p| {
            let pinged_up = p.get("pinged").and_then(Value::as_str) == Some("UP");
            Controller {
                hostname: p
                    .get("hostname")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                mode: p.get("mode").and_then(Value::as_str).map(str::to_string),
                responding: p
                    .get("responding")
                    .and_then(Value::as_bool)
                    .unwrap_or(pinged_up),
                latency_us: p.get("latency").and_then(Value::as_u64),
            }
        })
        .collect()
}

/// Fails with the error of a cheap authenticated request, if it fails.
async fn explain_down(client: &Client, version: &str) -> anyhow::Result<()> {
    client
        .get_json(&format!("/slurm/{version}/licenses"))
        .await
        .map(|_| ())
        .map_err(Into::into)
}
