//! Lists the jobs of a Slurm cluster, the same way whichever REST version it serves.
//!
//! ```sh
//! set -a; . /run/slurm-dev/24.11/cluster.env; set +a   # SLURM_REST_URL, SLURM_JWT, …
//! cargo run -p slurm-client --example list_jobs [-- --json]
//! ```

use slurm_client::{Client, JobQuery};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let json = std::env::args().any(|a| a == "--json");
    let client = Client::from_env()?;
    let negotiated = client.negotiate().await?;
    let response = client.list_jobs(&JobQuery::new()).await?;
    for warning in &response.warnings {
        eprintln!("slurmrestd warning: {warning}");
    }
    let list = response.value;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    eprintln!(
        "{} job(s) on Slurm {} (REST {})",
        list.jobs.len(),
        negotiated.release.as_deref().unwrap_or("?"),
        negotiated.version
    );
    println!(
        "{:>8}  {:<16} {:<10} {:<10} {:<12} NODES",
        "JOBID", "NAME", "USER", "PARTITION", "STATE"
    );
    for job in &list.jobs {
        println!(
            "{:>8}  {:<16} {:<10} {:<10} {:<12} {}",
            job.id,
            job.name,
            job.user,
            job.partition.as_deref().unwrap_or("-"),
            job.state,
            job.nodes
                .as_deref()
                .or(job.reason.as_deref())
                .unwrap_or("-"),
        );
    }
    Ok(())
}
