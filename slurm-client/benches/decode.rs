//! Decoding a 10,000-job `GET /slurm/v0.0.4x/jobs/` answer, in one run over the same bytes:
//!
//! 1. serde_json into `serde_json::Value` (the yardstick),
//! 2. serde_json into the version's generated type (`V004xOpenapiJobInfoResp`),
//! 3. the client's decoding step into that type (envelope read in the same pass,
//!    classification) on one thread, as for any other answer,
//! 4. the same step as `Client::list_jobs` takes it for a large answer: the jobs cut into
//!    runs decoded on one thread per core (at most 8),
//! 5. the full client path into the version-neutral `JobList`, exactly what
//!    `Client::list_jobs` does once the answer has arrived.
//!
//! The answer is built at run time from the richest recorded job list of
//! `tests/fixtures/<release>/<version>/`: its jobs are repeated with distinct ids and names
//! and written as slurmrestd writes them. Peak heap is counted by a global allocator in one
//! extra, untimed run: the most bytes alive at once during the decode, the body included.
//!
//! `cargo bench -p slurm-client --bench decode` (add `-- --quick` or set
//! `SLURM_BENCH_QUICK=1` for fewer runs and versions; `SLURM_BENCH_DECODE_JOBS=N` changes
//! the job count).

#![allow(unsafe_code)] // the counting allocator

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use slurm_client::ApiVersion;

/// The system allocator, keeping count of live bytes and their high-water mark while
/// `COUNTING` is on (it is off for the timed runs, so counting costs them nothing).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed while counting; only differences are meaningful.
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        let by = by as isize;
        let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

fn shrank(by: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_sub(by as isize, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed to `System` unchanged; only counters are updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size);
            shrank(layout.size());
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MB: f64 = 1_000_000.0;
/// Goals from the issue: generated ≥ 3× Value's speed, neutral ≤ 1.5× generated's time,
/// peak heap < 3× the payload.
const SPEEDUP_GOAL: f64 = 3.0;
const NEUTRAL_GOAL: f64 = 1.5;
const PEAK_GOAL: f64 = 3.0;

struct Settings {
    quick: bool,
    jobs: usize,
    runs: usize,
}

/// One way of decoding, measured.
struct Measured {
    /// Fastest of the timed runs.
    time: Duration,
    /// Peak heap of the decode, body included.
    peak: usize,
}

struct Row {
    label: String,
    payload: usize,
    value: Measured,
    generated: Measured,
    client_whole: Measured,
    client_step: Measured,
    neutral: Measured,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick")
        || std::env::var("SLURM_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let jobs = std::env::var("SLURM_BENCH_DECODE_JOBS")
        .ok()
        .map(|v| {
            v.parse()
                .expect("SLURM_BENCH_DECODE_JOBS: a number of jobs")
        })
        .unwrap_or(10_000);
    let settings = Settings {
        quick,
        jobs,
        runs: if quick { 3 } else { 7 },
    };
    println!(
        "decode benchmark: {} jobs per answer, fastest of {} timed runs per way (the ways take turns, round by round), heap counted in one more{}",
        settings.jobs,
        settings.runs,
        if quick { " (quick mode)" } else { "" }
    );
    let mut rows = vec![
        bench::<slurm_client::v0_0_45::types::V0045OpenapiJobInfoResp>(
            &settings,
            "26.05",
            ApiVersion::V0_0_45,
        ),
    ];
    if !settings.quick {
        rows.push(
            bench::<slurm_client::v0_0_44::types::V0044OpenapiJobInfoResp>(
                &settings,
                "26.05",
                ApiVersion::V0_0_44,
            ),
        );
        rows.push(
            bench::<slurm_client::v0_0_43::types::V0043OpenapiJobInfoResp>(
                &settings,
                "26.05",
                ApiVersion::V0_0_43,
            ),
        );
    }
    rows.push(
        bench::<slurm_client::v0_0_42::types::V0042OpenapiJobInfoResp>(
            &settings,
            "24.11",
            ApiVersion::V0_0_42,
        ),
    );
    summary(&rows);
}

fn bench<T: serde::de::DeserializeOwned>(
    settings: &Settings,
    release: &str,
    version: ApiVersion,
) -> Row {
    let (fixture, payload) = build_answer(release, version, settings.jobs);
    let label = format!("{version} ({release})");
    let shown = fixture
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(&fixture);
    println!(
        "\n{label}: {:.1} MB answer of {} jobs, built from {}",
        payload.len() as f64 / MB,
        settings.jobs,
        shown.display(),
    );
    let borrow = || payload.as_slice();
    let own = || payload.clone();
    let generated_name = std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("generated");
    let ways = [
        way("serde_json::Value", &payload, borrow, |body| {
            serde_json::from_slice::<Value>(body).expect("valid JSON")
        }),
        way(generated_name, &payload, borrow, |body| {
            serde_json::from_slice::<T>(body).expect("decodes as the generated type")
        }),
        way("client decode step, 1 thread", &payload, own, |body| {
            slurm_client::__bench::decode_jobs_generated_whole(version, body)
                .expect("client decode")
        }),
        way(
            &format!(
                "client decode step, {} threads",
                slurm_client::__bench::decode_threads()
            ),
            &payload,
            own,
            |body| {
                slurm_client::__bench::decode_jobs_generated(version, body).expect("client decode")
            },
        ),
        way("client list_jobs → JobList", &payload, own, |body| {
            let list = slurm_client::__bench::decode_jobs(version, body).expect("client listing");
            assert_eq!(list.value.jobs.len(), settings.jobs, "every job converted");
            list
        }),
    ];
    let [value, generated, client_whole, client_step, neutral] =
        measure(settings, payload.len(), &ways);
    Row {
        label,
        payload: payload.len(),
        value,
        generated,
        client_whole,
        client_step,
        neutral,
    }
}

/// One way of decoding the payload: a timed run, and a run that counts the heap.
struct Way<'a> {
    name: String,
    timed: Box<dyn Fn() -> Duration + 'a>,
    counted: Box<dyn Fn() -> usize + 'a>,
}

/// `decode` of the input `prepare` gives: the payload itself for a decoder that borrows it,
/// or a copy made before the clock starts for one that owns the body (as the client owns
/// the body it received). Dropping the result is not timed. The counted run reports the
/// most bytes alive at once during the decode beyond those alive before it, plus the body
/// (alive before, and needed by every decoder).
fn way<'a, I: 'a, R: 'a>(
    name: &str,
    payload: &'a [u8],
    prepare: impl Fn() -> I + 'a,
    decode: impl Fn(I) -> R + 'a,
) -> Way<'a> {
    let prepare = Rc::new(prepare);
    let decode = Rc::new(decode);
    let (p, d) = (prepare.clone(), decode.clone());
    Way {
        name: name.to_owned(),
        timed: Box::new(move || {
            let input = p();
            let started = Instant::now();
            let result = black_box(d(black_box(input)));
            let time = started.elapsed();
            drop(result);
            time
        }),
        counted: Box::new(move || {
            let input = prepare();
            let before = LIVE.load(Ordering::Relaxed);
            PEAK.store(before, Ordering::Relaxed);
            COUNTING.store(true, Ordering::Relaxed);
            let result = black_box(decode(black_box(input)));
            COUNTING.store(false, Ordering::Relaxed);
            let peak = (PEAK.load(Ordering::Relaxed) - before).max(0) as usize + payload.len();
            drop(result);
            peak
        }),
    }
}

/// Times every way `settings.runs` times, round by round (each round runs every way once),
/// so that a slow spell of the machine falls on all ways alike rather than on whichever was
/// running, and keeps each way's fastest run. Then counts each one's heap in one more run.
fn measure<const N: usize>(settings: &Settings, payload: usize, ways: &[Way; N]) -> [Measured; N] {
    let mut best = [Duration::MAX; N];
    for _ in 0..settings.runs {
        for (way, best) in ways.iter().zip(&mut best) {
            *best = (*best).min((way.timed)());
        }
    }
    std::array::from_fn(|i| {
        let (way, time) = (&ways[i], best[i]);
        let peak = (way.counted)();
        println!(
            "  {:<34} {:>8.1} ms {:>8.1} MB/s   peak heap {:>7.1} MB ({:.2}× payload)",
            way.name,
            time.as_secs_f64() * 1e3,
            payload as f64 / MB / time.as_secs_f64(),
            peak as f64 / MB,
            peak as f64 / payload as f64,
        );
        Measured { time, peak }
    })
}

/// The answer of `jobs` jobs: the richest recorded job list of `release`/`version` with
/// its jobs repeated (distinct `job_id`s and names), written as slurmrestd writes it
/// (two-space indentation, `\/` for `/`).
fn build_answer(release: &str, version: ApiVersion, jobs: usize) -> (PathBuf, Vec<u8>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(release)
        .join(version.to_string());
    let mut best: Option<(PathBuf, Value)> = None;
    let count = |d: &Value| d["jobs"].as_array().map_or(0, Vec::len);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("fixture directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !(name.starts_with("slurm_job") && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read(&path).expect("fixture readable");
        let Ok(doc) = serde_json::from_slice::<Value>(&text) else {
            continue;
        };
        if best.as_ref().is_none_or(|(_, b)| count(&doc) > count(b)) {
            best = Some((path, doc));
        }
    }
    let (path, mut doc) = best.unwrap_or_else(|| panic!("no job list in {}", dir.display()));
    let recorded = doc["jobs"].as_array().cloned().unwrap_or_default();
    assert!(!recorded.is_empty(), "{}: no jobs", path.display());
    let list: Vec<Value> = (0..jobs)
        .map(|i| {
            let mut job = recorded[i % recorded.len()].clone();
            let name = job["name"].as_str().unwrap_or("job").to_string();
            job["job_id"] = Value::from(1_000_000 + i as u64);
            job["name"] = Value::from(format!("{name}-{i}"));
            job
        })
        .collect();
    doc["jobs"] = Value::Array(list);
    let body = serde_json::to_vec_pretty(&doc).expect("serializes");
    // slurmrestd writes `/` as `\/`; outside strings JSON has no `/`, so this is exact.
    let mut escaped = Vec::with_capacity(body.len() + body.len() / 50);
    for &b in &body {
        if b == b'/' {
            escaped.push(b'\\');
        }
        escaped.push(b);
    }
    (path, escaped)
}

fn summary(rows: &[Row]) {
    let mbps = |row: &Row, m: &Measured| row.payload as f64 / MB / m.time.as_secs_f64();
    let ratio = |a: &Measured, b: &Measured| a.time.as_secs_f64() / b.time.as_secs_f64();
    let peak = |row: &Row, m: &Measured| m.peak as f64 / row.payload as f64;
    let mark = |ok: bool| if ok { "ok" } else { "MISSED" };
    let threads = slurm_client::__bench::decode_threads();
    println!("\nsummary: MB/s over the same bytes; speedup = Value time / typed time;");
    println!(
        "gen = serde_json into the generated type; step1 = the client's decode step on 1 thread, \
         stepN on {threads} (what list_jobs does);"
    );
    println!(
        "neutral = full client path (N threads) time / stepN time; pk* = peak heap ÷ payload \
         (body included)"
    );
    println!(
        "{:<16} {:>5} | {:>5} {:>5} {:>5} {:>5} {:>5} | {:>5} {:>5} {:<14} {:<13} | {:>4} {:>4} {:>4} {:>4} {:>4}",
        "version",
        "MB",
        "Value",
        "gen",
        "step1",
        "stepN",
        "neutr",
        "gen×",
        "step1×",
        "stepN× ≥3",
        "neutral≤1.5",
        "pkV",
        "pkG",
        "pk1",
        "pkN",
        "pkNe",
    );
    let mut all_ok = true;
    for row in rows {
        let gen_speedup = ratio(&row.value, &row.generated);
        let whole_speedup = ratio(&row.value, &row.client_whole);
        let step_speedup = ratio(&row.value, &row.client_step);
        let neutral = ratio(&row.neutral, &row.client_step);
        let peaks = [
            &row.value,
            &row.generated,
            &row.client_whole,
            &row.client_step,
            &row.neutral,
        ]
        .map(|m| peak(row, m));
        let typed_peaks_ok = peaks[1..].iter().all(|p| *p < PEAK_GOAL);
        all_ok &= step_speedup >= SPEEDUP_GOAL && neutral <= NEUTRAL_GOAL && typed_peaks_ok;
        println!(
            "{:<16} {:>5.1} | {:>5.0} {:>5.0} {:>5.0} {:>5.0} {:>5.0} | {:>5.2} {:>6.2} {:<14} {:<13} | {:>4.2} {:>4.2} {:>4.2} {:>4.2} {:>4.2} {}",
            row.label,
            row.payload as f64 / MB,
            mbps(row, &row.value),
            mbps(row, &row.generated),
            mbps(row, &row.client_whole),
            mbps(row, &row.client_step),
            mbps(row, &row.neutral),
            gen_speedup,
            whole_speedup,
            format!("{step_speedup:.2}× {}", mark(step_speedup >= SPEEDUP_GOAL)),
            format!("{neutral:.2}× {}", mark(neutral <= NEUTRAL_GOAL)),
            peaks[0],
            peaks[1],
            peaks[2],
            peaks[3],
            peaks[4],
            if typed_peaks_ok {
                "typed peaks ok (<3×)"
            } else {
                "typed peak MISSED (≥3×)"
            },
        );
    }
    println!(
        "goals (the client's decode into the generated types ≥{SPEEDUP_GOAL}× Value's speed, \
         neutral ≤{NEUTRAL_GOAL}× that time, typed peaks <{PEAK_GOAL}× payload): {}",
        if all_ok { "all met" } else { "NOT all met" }
    );
    if threads < 2 {
        println!("(this machine gives one thread: stepN is step1)");
    }
}
