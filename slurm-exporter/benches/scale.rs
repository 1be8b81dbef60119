//! The exporter at scale, against a real slurmctld: `cargo xtask bench` starts a Slurm 26.05
//! cluster with 4 real and 2,000 virtual nodes and runs this with `SLURM_BENCH_ENV_FILE` set.
//!
//! It tops the cluster up to `SLURM_BENCH_JOBS` jobs (default 20,000; held ones, plus a few
//! running on the real nodes), runs the real exporter binary against it with every source on,
//! and prints: time and bytes fetched per collection and per request, scrape latency over many
//! `/metrics` GETs by one and by a few concurrent scrapers, with `Accept-Encoding: gzip` as
//! Prometheus sends it and without (identity) for comparison, the size of the body in both
//! codings, the time to compress it, and the exporter's RSS.
//! `SLURM_BENCH_QUICK=1` scrapes less; `SLURM_BENCH_STRICT=1` fails when a target is missed;
//! `SLURM_BENCH_EXPORTER=path` runs another build of the exporter (e.g. an older one, to
//! compare in one session against the same cluster and jobs); `SLURM_BENCH_INTERVAL=3600`
//! (seconds, default 10) spaces the collections out, so that scrapes are measured without
//! collections running beside them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slurm_client::{Client, ClientBuilder, JobQuery, JobState, JobSubmission, NodeQuery};

const DEFAULT_JOBS: usize = 20_000;
const RUNNING_JOBS: usize = 8;
const SUBMITTERS: usize = 16;
const SCRAPERS: usize = 4;
const TARGET_P99: Duration = Duration::from_millis(5);
const TARGET_RSS_MB: f64 = 150.0;
const DEFAULT_INTERVAL_SECS: u64 = 10;

fn main() {
    let Some(env_file) = std::env::var_os("SLURM_BENCH_ENV_FILE") else {
        println!(
            "scale: skipped (SLURM_BENCH_ENV_FILE is not set; `cargo xtask bench` starts a large cluster and sets it)"
        );
        return;
    };
    let env = test_support::read_env_file(std::path::Path::new(&env_file));
    let quick = std::env::var("SLURM_BENCH_QUICK").is_ok_and(|v| v == "1");
    let strict = std::env::var("SLURM_BENCH_STRICT").is_ok_and(|v| v == "1");
    let target_jobs = std::env::var("SLURM_BENCH_JOBS")
        .ok()
        .map(|v| {
            v.parse::<usize>()
                .unwrap_or_else(|_| panic!("SLURM_BENCH_JOBS={v:?} is not a number"))
        })
        .unwrap_or(DEFAULT_JOBS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let missed = runtime.block_on(run(&env, target_jobs, quick));
    if strict && !missed.is_empty() {
        eprintln!("scale: missed {}", missed.join(", "));
        std::process::exit(1);
    }
}

async fn run(
    env: &std::collections::HashMap<String, String>,
    target_jobs: usize,
    quick: bool,
) -> Vec<String> {
    let var = |k: &str| {
        env.get(k)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| panic!("the cluster env file has no {k}"))
            .clone()
    };
    let client = client_for(&var("SLURM_REST_URL"), &var("SLURM_JWT"), "root");
    let user_client = env
        .get("SLURM_TEST_USER_JWT")
        .zip(env.get("SLURM_TEST_USER"))
        .map(|(jwt, user)| client_for(&var("SLURM_REST_URL"), jwt, user));
    let accounting = env.get("SLURM_ACCOUNTING").is_some_and(|v| v == "1");
    let release = env.get("SLURM_RELEASE").cloned().unwrap_or_default();

    println!("== slurm-exporter scale benchmark (real slurmctld, Slurm {release})");
    let held_partition = if env
        .get("SLURM_VIRTUAL_NODES")
        .is_some_and(|n| n != "0" && !n.is_empty())
    {
        "virtual"
    } else {
        "debug"
    };
    ensure_jobs(&client, user_client.as_ref(), target_jobs, held_partition).await;

    let started = Instant::now();
    let nodes = client
        .list_nodes(&NodeQuery::new().all(true))
        .await
        .expect("list nodes")
        .into_value()
        .nodes;
    let node_list_time = started.elapsed();
    let started = Instant::now();
    let jobs = client
        .list_jobs(&JobQuery::new().all(true))
        .await
        .expect("list jobs")
        .into_value()
        .jobs;
    let job_list_time = started.elapsed();
    let running = jobs.iter().filter(|j| j.state == JobState::Running).count();
    println!(
        "cluster: {} nodes ({} of them virtual, no slurmd), {} jobs ({running} running, {} pending)",
        nodes.len(),
        env.get("SLURM_VIRTUAL_NODES")
            .map(String::as_str)
            .unwrap_or("0"),
        jobs.len(),
        jobs.iter().filter(|j| j.state == JobState::Pending).count(),
    );
    println!(
        "reference: one full listing through slurm-client from this process: nodes {}, jobs {}",
        ms(node_list_time),
        ms(job_list_time)
    );
    drop(jobs);
    drop(nodes);

    let interval = Duration::from_secs(
        std::env::var("SLURM_BENCH_INTERVAL")
            .ok()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("SLURM_BENCH_INTERVAL={v:?} is not a number"))
            })
            .unwrap_or(DEFAULT_INTERVAL_SECS),
    );
    let sources = if accounting {
        "diag,nodes,jobs,partitions,reservations,licenses,shares,qos,associations"
    } else {
        "diag,nodes,jobs,partitions,reservations,licenses,shares"
    };
    let exporter = Exporter::start(
        &[
            ("SLURM_REST_URL", var("SLURM_REST_URL")),
            ("SLURM_JWT", var("SLURM_JWT")),
            ("SLURM_USER_NAME", "root".into()),
        ],
        &[
            "--sources",
            sources,
            "--interval",
            &format!("{}s", interval.as_secs()),
            "--timeout",
            "120s",
        ],
    );
    let http = http_client();
    let ready = exporter.wait_ready(&http, Duration::from_secs(300)).await;
    println!(
        "exporter: pid {}, sources {sources}, interval {}s; first snapshot after {}",
        exporter.child.id(),
        interval.as_secs(),
        ms(ready)
    );
    let first = scrape(&http, &exporter).await;
    let (_, rss_first) = memory(exporter.child.id());
    let cpu_first = cpu_seconds(exporter.child.id());
    let first_answers = exporter.answers();
    let first_durations = self_metric(&first, "slurm_exporter_collect_duration_seconds");

    // Later collections: nodes and jobs are asked "only if changed".
    let window = if quick {
        Duration::from_secs(25)
    } else {
        Duration::from_secs(45)
    };
    tokio::time::sleep(window).await;
    let later = scrape(&http, &exporter).await;
    let (hwm_collections, rss_later) = memory(exporter.child.id());
    let cpu_later = cpu_seconds(exporter.child.id()) - cpu_first;
    let later_answers = exporter.answers()[first_answers.len()..].to_vec();
    let later_durations = self_metric(&later, "slurm_exporter_collect_duration_seconds");
    let collections = self_metric(&later, "slurm_exporter_collections_total");
    let series = self_metric(&later, "slurm_exporter_series");

    println!(
        "\n-- collections (time: the source's whole collection: requests, decoding, building families; \
         bytes: slurmrestd's answers)"
    );
    println!(
        "{:<14} {:>12} {:>14} {:>12} {:>14} {:>8}",
        "source", "first", "first bytes", "later", "later bytes", "series"
    );
    let first_bytes = first_answer_bytes(&first_answers);
    let later_bytes = mean_answer_bytes(&later_answers);
    let (mut first_total, mut later_total) = (0usize, 0.0f64);
    for (source, first_secs) in &first_durations {
        let fb = first_bytes.get(source.as_str()).copied().unwrap_or(0);
        let lb = later_bytes.get(source.as_str()).copied().unwrap_or(0.0);
        first_total += fb;
        later_total += lb;
        println!(
            "{:<14} {:>12} {:>14} {:>12} {:>14} {:>8}",
            source,
            ms(Duration::from_secs_f64(*first_secs)),
            bytes(fb as f64),
            later_durations
                .get(source)
                .map_or("-".into(), |s| ms(Duration::from_secs_f64(*s))),
            bytes(lb),
            series.get(source).copied().unwrap_or(0.0),
        );
    }
    println!(
        "{:<14} {:>12} {:>14} {:>12} {:>14} {:>8}",
        "all (parallel)",
        ms(Duration::from_secs_f64(
            first_durations.values().copied().fold(0.0, f64::max)
        )),
        bytes(first_total as f64),
        ms(Duration::from_secs_f64(
            later_durations.values().copied().fold(0.0, f64::max)
        )),
        bytes(later_total),
        series.values().sum::<f64>(),
    );
    println!(
        "(first: the first collection, full listings; later: the last of {} more collections in {}s, \
         bytes the mean per request; nodes and jobs are asked only-if-changed)",
        collections.values().copied().fold(0.0, f64::max) - 1.0,
        window.as_secs()
    );
    println!(
        "exporter CPU time (user + system): {cpu_first:.2} s up to the first snapshot, \
         {cpu_later:.2} s in the {}s after it",
        window.as_secs()
    );
    let node_count = count_nodes(&later).max(1) as f64;
    let job_count = target_jobs.max(1) as f64;
    // The first answer of each is the full listing (only-if-changed comes later); for the
    // streamed job listing its time includes the decoding, for the others not.
    for (source, objects, what) in [("jobs", job_count, "job"), ("nodes", node_count, "node")] {
        let Some(answer) = first_answers.iter().find(|a| source_of(&a.path) == source) else {
            continue;
        };
        println!(
            "{source}: first (full) listing {} in {}, for {objects} {what}s: {} and {:.1} µs per {what}",
            bytes(answer.bytes as f64),
            ms(Duration::from_millis(answer.elapsed_ms)),
            bytes(answer.bytes as f64 / objects),
            answer.elapsed_ms as f64 * 1e3 / objects,
        );
    }
    println!("\n-- requests to slurmrestd (as the exporter's client logged them)");
    println!(
        "{:<40} {:>6} {:>14} {:>12}",
        "path", "count", "mean bytes", "mean time"
    );
    let mut by_path: BTreeMap<&str, (usize, usize, u64)> = BTreeMap::new();
    for a in first_answers.iter().chain(&later_answers) {
        let e = by_path.entry(a.path.as_str()).or_default();
        e.0 += 1;
        e.1 += a.bytes;
        e.2 += a.elapsed_ms;
    }
    for (path, (n, b, t)) in &by_path {
        println!(
            "{:<40} {:>6} {:>14} {:>12}",
            path,
            n,
            bytes(*b as f64 / *n as f64),
            ms(Duration::from_millis(t / *n as u64))
        );
    }

    let scrapes = if quick { 500 } else { 2000 };
    let body = later.len();
    let om_body = fetch(
        &http,
        &exporter,
        "application/openmetrics-text; version=1.0.0",
    )
    .await
    .len();
    let gz_body = fetch_gzip(&http, &exporter, "text/plain").await;
    let om_gz_body = fetch_gzip(
        &http,
        &exporter,
        "application/openmetrics-text; version=1.0.0",
    )
    .await;
    // Scrapers, exporter and whatever else runs share the machine's cores: the load says
    // how busy it was (latency tails follow it).
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // Gzip (what Prometheus asks for) and identity, one after the other at each
    // concurrency, so that both see the same cluster, snapshot and machine.
    let mut runs = Vec::new();
    for scrapers in [1, SCRAPERS] {
        let total = if scrapers == 1 { scrapes / 2 } else { scrapes };
        for gzip in [true, false] {
            let latencies = scrape_load(&exporter, total, scrapers, gzip).await;
            runs.push((scrapers, gzip, latencies.len(), percentiles(latencies)));
        }
    }
    let (hwm, rss) = memory(exporter.child.id());

    println!("\n-- /metrics");
    println!(
        "body: {} Prometheus text ({} lines), {} OpenMetrics",
        bytes(body as f64),
        later.lines().filter(|l| !l.starts_with('#')).count(),
        bytes(om_body as f64)
    );
    println!(
        "gzip body (Accept-Encoding: gzip, as Prometheus sends): {} Prometheus text ({:.1}% of identity), \
         {} OpenMetrics ({:.1}%)",
        bytes(gz_body as f64),
        100.0 * gz_body as f64 / body as f64,
        bytes(om_gz_body as f64),
        100.0 * om_gz_body as f64 / om_body as f64,
    );
    compression_times(&later);
    println!(
        "load average before the scrape load: {} ({} cores)",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "scrape latency (keep-alive, whole body read; gzip: the compressed body as sent, not decompressed):"
    );
    for (scrapers, gzip, count, (p50, p99, max)) in &runs {
        println!(
            "  {scrapers} scraper(s), {:<8} {count:>5} GETs: p50 {}  p99 {}  max {}",
            if *gzip { "gzip," } else { "identity," },
            ms(*p50),
            ms(*p99),
            ms(*max)
        );
    }
    let p99_of = |scrapers: usize, gzip: bool| {
        runs.iter()
            .find(|r| r.0 == scrapers && r.1 == gzip)
            .map(|r| r.3.1)
            .expect("measured")
    };
    for scrapers in [1, SCRAPERS] {
        println!(
            "  p99 gzip / identity, {scrapers} scraper(s): {:.2}",
            p99_of(scrapers, true).as_secs_f64() / p99_of(scrapers, false).as_secs_f64()
        );
    }
    let p99 = p99_of(SCRAPERS, true);
    println!("\n-- exporter memory (VmRSS and VmHWM, MB as the kernel counts them: MiB)");
    println!(
        "after the first collection: RSS {rss_first:.1} MB; after {}s more of collections: RSS {rss_later:.1} MB, \
         peak so far {hwm_collections:.1} MB",
        window.as_secs()
    );
    println!("after the scrape load: peak RSS (VmHWM) {hwm:.1} MB, RSS now (VmRSS) {rss:.1} MB");

    let mut missed = Vec::new();
    println!(
        "\n-- targets (issue 4), at {} nodes and {} jobs",
        count_nodes(&later),
        target_jobs
    );
    let p99_ok = p99 < TARGET_P99;
    println!(
        "scrape p99 ({SCRAPERS} concurrent scrapers, gzip as Prometheus asks) {} < {}: {} ({:.2} of the target)",
        ms(p99),
        ms(TARGET_P99),
        verdict(p99_ok),
        p99.as_secs_f64() / TARGET_P99.as_secs_f64()
    );
    if !p99_ok {
        missed.push(format!("scrape p99 {}", ms(p99)));
    }
    let rss_ok = hwm < TARGET_RSS_MB;
    println!(
        "peak RSS {hwm:.1} MB < {TARGET_RSS_MB} MB: {} ({:.2} of the target)",
        verdict(rss_ok),
        hwm / TARGET_RSS_MB
    );
    if !rss_ok {
        missed.push(format!("peak RSS {hwm:.1} MB"));
    }
    exporter.check_errors(&later);
    missed
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Nodes the exporter reports, from its own metrics (one `slurm_node_cpus` per node).
fn count_nodes(metrics: &str) -> usize {
    metrics
        .lines()
        .filter(|l| l.starts_with("slurm_node_cpus{"))
        .count()
}

// ---- the cluster

fn client_for(url: &str, jwt: &str, user: &str) -> Client {
    ClientBuilder::new(url)
        .token(slurm_client::StaticToken::new(jwt.to_string()))
        .user_name(user)
        .request_timeout(Duration::from_secs(300))
        .build()
        .expect("client for the bench cluster")
}

/// Tops the cluster up to `target` jobs: a few running on the real nodes, the rest held.
async fn ensure_jobs(client: &Client, user: Option<&Client>, target: usize, partition: &str) {
    let jobs = client
        .list_jobs(&JobQuery::new().all(true))
        .await
        .expect("list jobs")
        .into_value()
        .jobs;
    let running = jobs
        .iter()
        .filter(|j| {
            matches!(j.state, JobState::Running | JobState::Pending) && j.name == "bench-run"
        })
        .count();
    for _ in running..RUNNING_JOBS {
        client
            .submit_job(&running_job())
            .await
            .expect("submit a running job");
    }
    let have = jobs.len() + RUNNING_JOBS.saturating_sub(running);
    if have >= target {
        println!("jobs: {have} already there (wanted {target})");
        return;
    }
    let missing = target - have;
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..SUBMITTERS {
        // Every fourth submitter is the test user, so jobs spread over two users.
        let client = match user {
            Some(u) if worker % 4 == 3 => u.clone(),
            _ => client.clone(),
        };
        let next = next.clone();
        let partition = partition.to_string();
        tasks.spawn(async move {
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < missing {
                let job = JobSubmission::wrap("true")
                    .name("bench-held")
                    .partition(partition.clone())
                    .working_directory("/tmp")
                    .stdout("/dev/null")
                    .memory_per_node_mb(1024)
                    .time_limit_minutes(60)
                    .hold(true);
                client.submit_job(&job).await.expect("submit a held job");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("submitter");
    }
    let took = started.elapsed();
    println!(
        "jobs: submitted {missing} held jobs to partition {partition} in {} ({:.0}/s, {SUBMITTERS} submitters)",
        ms(took),
        missing as f64 / took.as_secs_f64()
    );
}

fn running_job() -> JobSubmission {
    JobSubmission::wrap("sleep 3600")
        .name("bench-run")
        .partition("debug")
        .working_directory("/tmp")
        .stdout("/dev/null")
        .memory_per_node_mb(256)
        .time_limit_minutes(90)
}

// ---- the exporter process

/// One answer of slurmrestd, from the exporter client's debug log.
#[derive(Clone, Debug)]
struct Answer {
    path: String,
    bytes: usize,
    elapsed_ms: u64,
}

struct Exporter {
    child: Child,
    addr: SocketAddr,
    answers: Arc<Mutex<Vec<Answer>>>,
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Exporter {
    fn start(env: &[(&str, String)], args: &[&str]) -> Exporter {
        let program = std::env::var_os("SLURM_BENCH_EXPORTER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_slurm-exporter").into());
        let mut child = Command::new(program)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .args([
                "--log",
                "info,slurm_client::transport=debug,slurm_client::stream=debug",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the exporter binary");
        let stderr = child.stderr.take().expect("piped stderr");
        let answers = Arc::new(Mutex::new(Vec::new()));
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let answers = answers.clone();
            let warnings = warnings.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                        continue;
                    };
                    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
                    match field("message") {
                        "slurm-exporter starting" => {
                            if let Ok(addr) = field("listen").parse() {
                                let _ = tx.send(addr);
                            }
                        }
                        "slurmrestd answered" => answers.lock().unwrap().push(Answer {
                            path: field("path").to_string(),
                            bytes: v.get("bytes").and_then(|x| x.as_u64()).unwrap_or(0) as usize,
                            elapsed_ms: v.get("elapsed_ms").and_then(|x| x.as_u64()).unwrap_or(0),
                        }),
                        _ if matches!(field("level"), "WARN" | "ERROR") => {
                            warnings.lock().unwrap().push(line.clone())
                        }
                        _ => {}
                    }
                }
            });
        }
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the exporter did not log its listen address within 30 s");
        Exporter {
            child,
            addr,
            answers,
            warnings,
        }
    }

    fn answers(&self) -> Vec<Answer> {
        self.answers.lock().unwrap().clone()
    }

    async fn wait_ready(&self, http: &reqwest::Client, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let url = format!("http://{}/readyz", self.addr);
            if let Ok(r) = http.get(url).send().await
                && r.status().is_success()
            {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "no snapshot within {limit:?}; warnings: {:?}",
                self.warnings.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Prints the sources that failed: their figures would mean nothing.
    fn check_errors(&self, metrics: &str) {
        let down: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("slurm_exporter_source_up{") && l.ends_with(" 0"))
            .collect();
        if !down.is_empty() {
            println!("\nWARNING: sources failing at the end: {down:?}");
        }
        let warnings = self.warnings.lock().unwrap();
        if !warnings.is_empty() {
            println!("\nexporter warnings ({}):", warnings.len());
            for w in warnings.iter().take(10) {
                println!("  {w}");
            }
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes of each source's first answer (one request per source per collection).
fn first_answer_bytes(answers: &[Answer]) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for a in answers {
        out.entry(source_of(&a.path)).or_insert(a.bytes);
    }
    out
}

/// Mean bytes of each source's answers.
fn mean_answer_bytes(answers: &[Answer]) -> BTreeMap<&'static str, f64> {
    let mut sums: BTreeMap<&'static str, (usize, usize)> = BTreeMap::new();
    for a in answers {
        let e = sums.entry(source_of(&a.path)).or_default();
        e.0 += 1;
        e.1 += a.bytes;
    }
    sums.into_iter()
        .map(|(k, (n, b))| (k, b as f64 / n as f64))
        .collect()
}

fn source_of(path: &str) -> &'static str {
    let resource = path
        .trim_end_matches('/')
        .rsplit('/')
        .find(|s| !s.is_empty() && !s.starts_with('v'))
        .unwrap_or("");
    match resource {
        "diag" => "diag",
        "nodes" => "nodes",
        "jobs" => "jobs",
        "partitions" => "partitions",
        "reservations" => "reservations",
        "licenses" => "licenses",
        "shares" => "shares",
        "qos" => "qos",
        "associations" => "associations",
        _ => "other",
    }
}

/// `name{source="x"} value` lines of a self metric, by source.
fn self_metric(metrics: &str, name: &str) -> BTreeMap<String, f64> {
    let prefix = format!("{name}{{source=\"");
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (source, rest) = rest.split_once('"')?;
            let value = rest.rsplit(' ').next()?.parse().ok()?;
            Some((source.to_string(), value))
        })
        .collect()
}

// ---- scraping

fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client")
}

async fn scrape(http: &reqwest::Client, exporter: &Exporter) -> String {
    fetch(http, exporter, "text/plain").await
}

async fn fetch(http: &reqwest::Client, exporter: &Exporter, accept: &str) -> String {
    let resp = http
        .get(format!("http://{}/metrics", exporter.addr))
        .header("accept", accept)
        .send()
        .await
        .expect("scrape");
    assert!(resp.status().is_success(), "scrape: {}", resp.status());
    resp.text().await.expect("scrape body")
}

/// Size of the body as sent when gzip is accepted (checks that it is gzip).
async fn fetch_gzip(http: &reqwest::Client, exporter: &Exporter, accept: &str) -> usize {
    let resp = http
        .get(format!("http://{}/metrics", exporter.addr))
        .header("accept", accept)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .expect("scrape");
    assert!(resp.status().is_success(), "scrape: {}", resp.status());
    assert_eq!(
        resp.headers()
            .get("content-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("gzip"),
        "the exporter did not answer with gzip"
    );
    resp.bytes().await.expect("scrape body").len()
}

/// How long compressing the whole Prometheus text takes in this process (the exporter
/// compresses each source's part when that source changes, so a snapshot costs at most
/// this), at the exporter's level and at zlib's default for comparison.
fn compression_times(text: &str) {
    let rounds = 5;
    let mut figures = Vec::new();
    for level in [slurm_exporter::gzip::LEVEL, 6] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..rounds {
            let started = Instant::now();
            size = slurm_exporter::gzip::Deflated::new(text.as_bytes(), level).compressed_len();
            times.push(started.elapsed());
        }
        times.sort();
        figures.push(format!(
            "level {level}{}: {} (median of {rounds}) to {}",
            if level == slurm_exporter::gzip::LEVEL {
                " (the exporter's)"
            } else {
                ""
            },
            ms(times[rounds / 2]),
            bytes(size as f64)
        ));
    }
    println!(
        "compressing the whole Prometheus text once ({}), flate2/zlib-rs: {}",
        bytes(text.len() as f64),
        figures.join("; ")
    );
}

/// (p50, p99, max).
fn percentiles(mut latencies: Vec<Duration>) -> (Duration, Duration, Duration) {
    latencies.sort();
    let n = latencies.len();
    let p = |q: f64| latencies[((n as f64 * q).ceil() as usize).clamp(1, n) - 1];
    (p(0.50), p(0.99), latencies[n - 1])
}

/// `total` scrapes shared by `scrapers` concurrent scrapers, each on its own kept-alive
/// connection, while the exporter keeps collecting; with `gzip` they send
/// `Accept-Encoding: gzip` as Prometheus does (and read the compressed body).
async fn scrape_load(
    exporter: &Exporter,
    total: usize,
    scrapers: usize,
    gzip: bool,
) -> Vec<Duration> {
    let url = format!("http://{}/metrics", exporter.addr);
    let encoding = if gzip { "gzip" } else { "identity" };
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..scrapers {
        let http = http_client();
        let url = url.clone();
        tasks.spawn(async move {
            // Warm the connection first.
            let _ = http.get(&url).send().await.expect("scrape").bytes().await;
            let mut out = Vec::with_capacity(total / scrapers);
            for _ in 0..total / scrapers {
                let started = Instant::now();
                let resp = http
                    .get(&url)
                    .header("accept-encoding", encoding)
                    .send()
                    .await
                    .expect("scrape");
                let body = resp.bytes().await.expect("scrape body");
                out.push(started.elapsed());
                assert!(!body.is_empty());
            }
            out
        });
    }
    let mut all = Vec::with_capacity(total);
    while let Some(done) = tasks.join_next().await {
        all.extend(done.expect("scraper"));
    }
    all
}

/// The CPU time (user + system) process `pid` used so far, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of proc_pid_stat(5), the 12th and 13th after the
    // name; in clock ticks of USER_HZ, which is 100 on every Linux this runs on.
    (ticks(11) + ticks(12)) / 100.0
}

/// (VmHWM, VmRSS) in MB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kb("VmHWM:") / 1024.0, kb("VmRSS:") / 1024.0)
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.2} ms")
    }
}

fn bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}
