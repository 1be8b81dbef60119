//! A full job listing versus a [`JobTracker`] poll of an unchanged cluster, against a real
//! slurmrestd.
//!
//! ```sh
//! SLURM_BENCH_ENV_FILE=/run/slurm-dev/26.05/cluster.env SLURM_BENCH_JOBS=2000 \
//!     cargo bench -p slurm-client --bench tracking
//! ```
//!
//! - `SLURM_BENCH_ENV_FILE`: the cluster's `cluster.env` (as written by `cargo xtask slurm
//!   up`: `SLURM_REST_URL`, `SLURM_JWT`, `SLURM_USER_NAME`); unset → the bench is skipped.
//! - `SLURM_BENCH_JOBS` (default 10000): the cluster is first filled up to this many jobs
//!   with held `sleep` jobs named `slurm-bench-held`, submitted through the client in
//!   parallel. Slurm's default `MaxJobCount` is 10000, so fewer may fit: the bench goes on
//!   with what it got and says so. The jobs are left in place for the next run
//!   (`scancel --name slurm-bench-held` removes them), unless `SLURM_BENCH_CLEANUP=1`, which
//!   cancels the jobs this run submitted at the end.
//!
//! Bytes are the response bodies as received, counted from the client's own
//! `slurmrestd answered` debug event (`bytes`, `elapsed_ms`); decoding time is the call's
//! time minus the time until the body had arrived (millisecond resolution).

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use slurm_client::{Client, ClientBuilder, JobQuery, JobSubmission, JobTracker, StaticToken};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

const HELD_NAME: &str = "slurm-bench-held";
/// Submissions (and cancellations) in flight at once.
const PARALLEL: usize = 32;
/// Polls of the unchanged cluster that are measured.
const POLLS: usize = 5;

fn main() {
    let Ok(env_file) = std::env::var("SLURM_BENCH_ENV_FILE") else {
        println!("skipped: set SLURM_BENCH_ENV_FILE");
        return;
    };
    let wanted: usize = std::env::var("SLURM_BENCH_JOBS")
        .ok()
        .map(|v| v.parse().expect("SLURM_BENCH_JOBS: a number of jobs"))
        .unwrap_or(10_000);
    let cleanup = std::env::var("SLURM_BENCH_CLEANUP").is_ok_and(|v| v == "1");
    tracing::subscriber::set_global_default(Meter).expect("no other subscriber");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(err) = runtime.block_on(run(Path::new(&env_file), wanted, cleanup)) {
        eprintln!("tracking benchmark failed: {err}");
        std::process::exit(1);
    }
}

async fn run(env_file: &Path, wanted: usize, cleanup: bool) -> Result<(), slurm_client::Error> {
    let cluster = test_support::Cluster::load(env_file);
    let url = cluster.url();
    let mut builder = ClientBuilder::new(url)
        .request_timeout(Duration::from_secs(300))
        .user_name(cluster.user());
    if let Some(jwt) = cluster.opt("SLURM_JWT") {
        builder = builder.token(StaticToken::new(jwt.to_string()));
    }
    let client = builder.build()?;
    let negotiated = client.negotiate().await?;
    println!(
        "tracking benchmark: {url} (Slurm {}, REST {}), {wanted} jobs wanted",
        negotiated.release.as_deref().unwrap_or("?"),
        negotiated.version
    );

    let present = client.list_jobs(&JobQuery::new()).await?.value.jobs.len();
    let submitted = if present < wanted {
        fill(&client, wanted - present).await
    } else {
        Vec::new()
    };
    let result = measure(&client, wanted).await;
    if cleanup && !submitted.is_empty() {
        cancel(&client, &submitted).await;
    } else if !submitted.is_empty() {
        println!(
            "left {} held jobs named {HELD_NAME} in place (`scancel --name {HELD_NAME}` removes them)",
            submitted.len()
        );
    }
    result
}

async fn measure(client: &Client, wanted: usize) -> Result<(), slurm_client::Error> {
    // A full listing, as any client without tracking does on every poll.
    let (full_list, full) = Call::time(client.list_jobs(&JobQuery::new())).await;
    let jobs = full_list?.value.jobs.len();
    if jobs < wanted {
        println!("note: the cluster holds {jobs} jobs, fewer than the {wanted} asked for");
    }

    // The tracker's first poll is a full listing too; the next ones send `update_time`.
    let mut tracker = JobTracker::new(client.clone());
    let (first_poll, first) = Call::time(tracker.poll()).await;
    let first_changes = first_poll?.changes.len();
    // slurmctld repeats the full list while its last change is within a second of the
    // previous answer; wait until it answers "unchanged" (a busy cluster may never).
    let mut settled = false;
    for _ in 0..10 {
        let (poll, _) = Call::time(tracker.poll()).await;
        if poll?.unchanged {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let mut polls = Vec::new();
    for _ in 0..POLLS {
        let (poll, call) = Call::time(tracker.poll()).await;
        let poll = poll?;
        polls.push((poll.unchanged, poll.changes.len(), call));
    }
    let unchanged = polls.iter().filter(|p| p.0).count();
    let changes: usize = polls.iter().map(|p| p.1).sum();
    let median = |f: fn(&Call) -> f64| {
        let mut v: Vec<f64> = polls.iter().map(|p| f(&p.2)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let poll_bytes = median(|c| c.bytes as f64);
    let poll_ms = median(|c| c.total.as_secs_f64() * 1e3);
    let poll_decode_ms = median(Call::decode_ms);

    println!("\n{jobs} jobs in the cluster");
    println!(
        "{:<38} {:>12} {:>10} {:>11} {:>9}",
        "", "body bytes", "total ms", "decode ms", "changes"
    );
    println!(
        "{:<38} {:>12} {:>10.1} {:>11.1} {:>9}",
        "full listing (list_jobs)",
        full.bytes,
        full.total.as_secs_f64() * 1e3,
        full.decode_ms(),
        "-"
    );
    println!(
        "{:<38} {:>12} {:>10.1} {:>11.1} {:>9}",
        "tracker: first poll (full)",
        first.bytes,
        first.total.as_secs_f64() * 1e3,
        first.decode_ms(),
        first_changes
    );
    println!(
        "{:<38} {:>12.0} {:>10.2} {:>11.2} {:>9}",
        format!("tracker: unchanged poll (median of {POLLS})"),
        poll_bytes,
        poll_ms,
        poll_decode_ms,
        changes
    );
    println!("\nsummary");
    println!(
        "  {unchanged} of {POLLS} polls answered \"unchanged\"{}; {changes} changes reported",
        if settled {
            ""
        } else {
            " (the cluster never settled: something keeps changing)"
        }
    );
    println!(
        "  bytes:  full {} vs poll {:.0} → {:.0}× less",
        full.bytes,
        poll_bytes,
        full.bytes as f64 / poll_bytes.max(1.0)
    );
    println!(
        "  time:   full {:.1} ms vs poll {:.2} ms → {:.0}× faster",
        full.total.as_secs_f64() * 1e3,
        poll_ms,
        full.total.as_secs_f64() * 1e3 / poll_ms.max(0.001)
    );
    println!(
        "  decode: full {:.1} ms vs poll {:.2} ms",
        full.decode_ms(),
        poll_decode_ms
    );
    Ok(())
}

/// What one client call moved and how long it took.
#[derive(Clone, Copy)]
struct Call {
    /// Response body bytes, summed over the HTTP requests the call made.
    bytes: u64,
    /// Milliseconds until the bodies had arrived, summed.
    transfer_ms: u64,
    /// The whole call.
    total: Duration,
}

impl Call {
    async fn time<T>(call: impl Future<Output = T>) -> (T, Call) {
        let before = *METER.lock().unwrap();
        let started = Instant::now();
        let out = call.await;
        let total = started.elapsed();
        let after = *METER.lock().unwrap();
        let measured = Call {
            bytes: after.bytes - before.bytes,
            transfer_ms: after.transfer_ms - before.transfer_ms,
            total,
        };
        (out, measured)
    }

    /// Time after the bodies had arrived: decoding and conversion.
    fn decode_ms(&self) -> f64 {
        (self.total.as_secs_f64() * 1e3 - self.transfer_ms as f64).max(0.0)
    }
}

/// Totals of the client's `slurmrestd answered` events so far.
static METER: Mutex<Call> = Mutex::new(Call {
    bytes: 0,
    transfer_ms: 0,
    total: Duration::ZERO,
});

/// A tracing subscriber that only adds up the client's per-answer `bytes` and `elapsed_ms`.
struct Meter;

#[derive(Default)]
struct Answer {
    bytes: Option<u64>,
    elapsed_ms: Option<u64>,
}

impl Visit for Answer {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "bytes" => self.bytes = Some(value),
            "elapsed_ms" => self.elapsed_ms = Some(value),
            _ => {}
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value.max(0) as u64);
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl Subscriber for Meter {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("slurm_client")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut answer = Answer::default();
        event.record(&mut answer);
        if let (Some(bytes), Some(ms)) = (answer.bytes, answer.elapsed_ms) {
            let mut meter = METER.lock().unwrap();
            meter.bytes += bytes;
            meter.transfer_ms += ms;
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Submits `count` held jobs, `PARALLEL` at a time, until done or slurmctld refuses more.
async fn fill(client: &Client, count: usize) -> Vec<u32> {
    println!("submitting {count} held jobs ({PARALLEL} at a time)…");
    let started = Instant::now();
    let job = JobSubmission::wrap("sleep 60")
        .name(HELD_NAME)
        .partition("debug")
        .working_directory("/tmp")
        .time_limit_minutes(5)
        .hold(true);
    let mut ids = Vec::with_capacity(count);
    let mut refusal = None;
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0;
    loop {
        while refusal.is_none() && next < count && tasks.len() < PARALLEL {
            let (client, job) = (client.clone(), job.clone());
            tasks.spawn(async move { client.submit_job(&job).await });
            next += 1;
        }
        let Some(done) = tasks.join_next().await else {
            break;
        };
        match done.expect("submission task") {
            Ok(response) => ids.push(response.value.job_id),
            Err(err) => {
                refusal.get_or_insert(err);
            }
        }
    }
    println!(
        "submitted {} held jobs in {:.1} s{}",
        ids.len(),
        started.elapsed().as_secs_f64(),
        refusal
            .map(|e| format!("; slurmctld stopped accepting: {e}"))
            .unwrap_or_default()
    );
    ids
}

async fn cancel(client: &Client, ids: &[u32]) {
    let mut failed = 0;
    for chunk in ids.chunks(PARALLEL) {
        let mut tasks = tokio::task::JoinSet::new();
        for &id in chunk {
            let client = client.clone();
            tasks.spawn(async move { client.cancel_job(id).await });
        }
        while let Some(done) = tasks.join_next().await {
            failed += usize::from(done.expect("cancel task").is_err());
        }
    }
    println!(
        "cancelled {} jobs this run submitted ({failed} failed)",
        ids.len() - failed
    );
}
