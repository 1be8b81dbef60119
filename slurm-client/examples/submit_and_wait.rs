//! Submits a batch job, waits until it has ended and prints its final state and exit code,
//! like `sbatch --wait`. Exits with the job's exit code when it failed (1 if it has none).
//!
//! ```sh
//! set -a; . /run/slurm-dev/26.05/cluster.env; set +a   # SLURM_REST_URL, SLURM_JWT, …
//! cargo run -p slurm-client --example submit_and_wait [-- 'COMMAND …']   # default: hostname
//! ```

use std::process::ExitCode;
use std::time::Duration;

use slurm_client::{Client, Job, JobState, JobSubmission};

/// The first wait between two polls; it doubles up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(500);
const MAX_POLL: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = if args.is_empty() {
        "hostname".to_owned()
    } else {
        args.join(" ")
    };
    let client = Client::from_env()?;

    // The working directory is a path on the compute nodes (and where slurm-<id>.out goes).
    let job = JobSubmission::wrap(&command)
        .name("submit_and_wait")
        .working_directory("/tmp")
        .time_limit_minutes(10);
    let submitted = client.submit_job(&job).await?.value;
    eprintln!("submitted job {}: {command}", submitted.job_id);

    let job = wait_until_finished(&client, submitted.job_id).await?;
    println!(
        "job {} {} on {}: {}",
        job.id,
        job.state,
        job.nodes.as_deref().unwrap_or("-"),
        describe(job.exit_code.as_ref()),
    );
    if let Some(pattern) = &job.stdout {
        // Some releases report the pattern as given (`slurm-%j.out`, relative to the job's
        // working directory), others the path it became.
        let mut path = pattern.replace("%j", &job.id.to_string());
        if !path.starts_with('/') {
            let dir = job.working_directory.as_deref().unwrap_or(".");
            path = format!("{}/{path}", dir.trim_end_matches('/'));
        }
        let host = job.batch_host.as_deref().unwrap_or("its node");
        eprintln!("its output: {path} on {host}");
    }
    let return_code = job.exit_code.as_ref().and_then(|e| e.return_code);
    Ok(match (&job.state, return_code) {
        (JobState::Completed, Some(0) | None) => ExitCode::SUCCESS,
        (_, Some(rc @ 1..=255)) => ExitCode::from(rc as u8),
        _ => ExitCode::FAILURE,
    })
}

/// `exit code 0`, `exit code 0, signal KILL`, … as `sacct` would put it in words.
fn describe(exit: Option<&slurm_client::ExitCode>) -> String {
    let Some(exit) = exit else {
        return "no exit code".into();
    };
    let mut text = match exit.return_code {
        Some(rc) => format!("exit code {rc}"),
        None => format!("exit status {}", exit.status.join(",")),
    };
    match (&exit.signal_name, exit.signal) {
        (Some(name), _) => text.push_str(&format!(", signal {name}")),
        (None, Some(signal)) if signal != 0 => text.push_str(&format!(", signal {signal}")),
        _ => {}
    }
    text
}

/// Polls the job until it has ended, waiting longer between polls while it runs.
async fn wait_until_finished(client: &Client, id: u32) -> Result<Job, slurm_client::Error> {
    let mut delay = FIRST_POLL;
    let mut last_state = None;
    loop {
        let job = client.get_job(id).await?.value;
        if last_state.as_ref() != Some(&job.state) {
            eprintln!("job {id}: {}", job.state);
            last_state = Some(job.state.clone());
        }
        if job.state.is_finished() {
            return Ok(job);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_POLL);
    }
}
