//! Decoding a large listing answer on several threads. slurmrestd's job listing is about
//! 8 KiB of JSON per job (155 MiB at 20,000 jobs), almost all of it the elements of one
//! top-level array; those elements are cut into runs, and each run is decoded (and
//! converted) on its own thread.
//!
//! The cuts are found without parsing. slurmrestd pretty-prints, so two elements of the
//! array are separated by `,`, the same line break and indentation that come before the
//! first element, and `{`. A JSON string cannot hold a raw line break, so that pattern is
//! never inside a string, and the indentation ties it to the array's depth. Besides, each
//! run must decode as whole elements separated by commas that fill it exactly, which a cut
//! anywhere else cannot give (it leaves a bracket open on one side).
//!
//! Any doubt (a body that is not pretty-printed, an element that fails to decode, a cut
//! that does not fit) and the whole body is decoded on the calling thread as every other
//! answer is, so errors (JSON path, `errors[]`, the `Infinity`/`NaN` fix-up) stay exactly
//! the same.

use memchr::memmem;
use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::stream::split::Split;
use crate::transport::{Reply, read_answer};

/// Bytes of array below which another thread is not worth starting.
const MIN_RUN: usize = if cfg!(test) { 64 << 10 } else { 4 << 20 };
/// At most this many threads decode one answer.
const MAX_THREADS: usize = 8;
/// How much of the body's start is searched for the array's `[`.
const HEAD: usize = 64 << 10;

/// Decodes a 2xx answer `body` whose top-level array `key` holds elements `I`, handing
/// each to `convert`: the answer itself (with that array empty) as `R`, and the converted
/// elements in their order. `take` pulls the elements out of an `R` decoded whole (the
/// one-thread path).
pub(crate) fn read_listing<I, J, R>(
    method: &Method,
    path: &str,
    status: u16,
    body: Vec<u8>,
    key: &str,
    take: impl FnOnce(&mut R) -> Vec<I>,
    convert: impl Fn(I) -> J + Sync,
) -> Result<(Reply<R>, Vec<J>), Error>
where
    I: DeserializeOwned,
    J: Send,
    R: DeserializeOwned,
{
    let large = body.len() >= 2 * MIN_RUN;
    let read = move || {
        let plan = (large && (200..=299).contains(&status))
            .then(|| Plan::new(&body, key, threads()))
            .flatten();
        if let Some(plan) = plan {
            if let Some((items, close)) = plan.decode(&body, &convert) {
                let mut rest = body[..=plan.open].to_vec();
                rest.extend_from_slice(&body[close..]);
                drop(body);
                let reply = read_answer::<R>(method, path, status, rest)?;
                return Ok((reply, items));
            }
        }
        let mut reply = read_answer::<R>(method, path, status, body)?;
        let items = take(&mut reply.value).into_iter().map(convert).collect();
        Ok((reply, items))
    };
    // Decoding 100 MB takes a few hundred milliseconds: a multi-threaded runtime is told,
    // so that it moves this worker's other tasks elsewhere meanwhile.
    match tokio::runtime::Handle::try_current() {
        Ok(runtime)
            if large && runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
        {
            tokio::task::block_in_place(read)
        }
        _ => read(),
    }
}

/// How many threads may decode one answer: one per core, at most [`MAX_THREADS`].
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS))
}

/// Where the array is and where its elements are cut into runs.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    /// The array's `[`.
    open: usize,
    /// Where each run starts (the first element, then just after each cut's `,`).
    starts: Vec<usize>,
}

impl Plan {
    /// A plan for `threads` runs, or `None` when the body is better decoded whole.
    fn new(body: &[u8], key: &str, threads: usize) -> Option<Plan> {
        if threads < 2 || body.len() < 2 * MIN_RUN {
            return None;
        }
        let open = array_start(body, key)?;
        let first = open
            + 1
            + body[open + 1..]
                .iter()
                .position(|b| !b.is_ascii_whitespace())?;
        let indent = &body[open + 1..first];
        if body[first] != b'{' || !indent.contains(&b'\n') {
            return None;
        }
        let mut separator = Vec::with_capacity(indent.len() + 2);
        separator.push(b',');
        separator.extend_from_slice(indent);
        separator.push(b'{');
        let finder = memmem::Finder::new(&separator);

        let runs = threads.min((body.len() - first) / MIN_RUN);
        let mut starts = vec![first];
        for k in 1..runs {
            let target = first + (body.len() - first) * k / runs;
            let from = target.max(starts[starts.len() - 1]);
            let Some(at) = finder.find(&body[from..]) else {
                break;
            };
            starts.push(from + at + 1);
        }
        (starts.len() > 1).then_some(Plan { open, starts })
    }

    /// Decodes every run, the first on this thread; the elements in order and the offset
    /// of the array's `]`, or `None` if any run does not decode.
    fn decode<I, J>(
        &self,
        body: &[u8],
        convert: &(impl Fn(I) -> J + Sync),
    ) -> Option<(Vec<J>, usize)>
    where
        I: DeserializeOwned,
        J: Send,
    {
        let last = self.starts.len() - 1;
        let run = |k: usize| {
            let end = if k == last {
                body.len()
            } else {
                self.starts[k + 1] - 1
            };
            decode_run(&body[self.starts[k]..end], k == last, convert)
        };
        let runs: Vec<Option<(Vec<J>, Option<usize>)>> = std::thread::scope(|scope| {
            let others: Vec<_> = (1..=last).map(|k| scope.spawn(move || run(k))).collect();
            let mut runs = vec![run(0)];
            runs.extend(others.into_iter().map(|t| t.join().ok().flatten()));
            runs
        });
        let mut items = Vec::new();
        let mut close = None;
        for (k, r) in runs.into_iter().enumerate() {
            let (run_items, run_close) = r?;
            if items.is_empty() {
                items.reserve_exact(run_items.len() * (last + 1));
            }
            items.extend(run_items);
            if k == last {
                close = run_close.map(|c| self.starts[k] + c);
            }
        }
        Some((items, close?))
    }
}

/// Decodes the elements of one run, separated by commas; a run that is not the last
/// must end with its last element (whitespace aside), the last one with the array's `]`,
/// whose offset in the run is returned.
fn decode_run<I: DeserializeOwned, J>(
    run: &[u8],
    last: bool,
    convert: &impl Fn(I) -> J,
) -> Option<(Vec<J>, Option<usize>)> {
    // Checked once per run rather than string by string (as `decode::decode` does).
    let text = std::str::from_utf8(run).ok()?;
    let mut items = Vec::new();
    let mut pos = 0;
    loop {
        let mut stream = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<I>();
        let item = stream.next()?.ok()?;
        pos += stream.byte_offset();
        items.push(convert(item));
        pos += run[pos..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(run.len() - pos);
        match run.get(pos) {
            Some(b',') => pos += 1,
            Some(b']') if last => return Some((items, Some(pos))),
            None if !last => return Some((items, None)),
            _ => return None,
        }
    }
}

/// The offset of the top-level array `key`'s `[`, if it is in the body's first `HEAD`
/// bytes (slurmrestd writes the listed array first).
fn array_start(body: &[u8], key: &str) -> Option<usize> {
    let mut split = Split::new(key);
    split.feed(&body[..body.len().min(HEAD)], |_| {}).ok()?;
    split.array_start().map(|at| at as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Job {
        job_id: u32,
        name: String,
    }

    #[derive(Debug, Deserialize)]
    struct Jobs {
        jobs: Option<Vec<Job>>,
        last_update: Option<u64>,
    }

    fn body(jobs: usize) -> Vec<u8> {
        let jobs: Vec<_> = (0..jobs)
            .map(|i| serde_json::json!({"job_id": i, "name": format!("n,\n  {{{i}"), "pad": "x".repeat(200)}))
            .collect();
        serde_json::to_vec_pretty(
            &serde_json::json!({"jobs": jobs, "last_update": 7, "errors": []}),
        )
        .unwrap()
    }

    type Listing = (Reply<Jobs>, Vec<(u32, String)>);

    fn read(body: Vec<u8>) -> Result<Listing, Error> {
        read_listing(
            &Method::GET,
            "/slurm/v0.0.45/jobs/",
            200,
            body,
            "jobs",
            |r: &mut Jobs| r.jobs.take().unwrap_or_default(),
            |j: Job| (j.job_id, j.name),
        )
    }

    #[test]
    fn plan_cuts_between_elements_only() {
        let body = body(3_000);
        let plan = Plan::new(&body, "jobs", 4).expect("a plan");
        assert_eq!(plan.starts.len(), 4);
        assert_eq!(body[plan.starts[0]], b'{');
        for &start in &plan.starts[1..] {
            assert_eq!(body[start - 1], b',');
            assert!(body[start..].starts_with(b"\n    {"));
        }
        let (items, close) = plan.decode(&body, &|j: Job| j.job_id).unwrap();
        assert_eq!(items, (0..3_000).collect::<Vec<u32>>());
        assert_eq!(body[close], b']');
    }

    #[test]
    fn a_cut_inside_an_element_does_not_decode() {
        let body = b"{\"jobs\": [\n    {\"job_id\": 1, \"name\": \"a\", \"x\": [0,\n    {\"y\": 1}]},\n    {\"job_id\": 2, \"name\": \"b\"}\n  ]}";
        let at = |pattern: &[u8], from: usize| from + memmem::find(&body[from..], pattern).unwrap();
        let open = at(b"[", 0);
        let first = at(b"{", open);
        let nested = at(b"0,", first) + 2;
        let between = at(b"},", nested) + 2;
        let plan = |cut| Plan {
            open,
            starts: vec![first, cut],
        };
        assert!(plan(nested).decode(body, &|j: Job| j.job_id).is_none());
        let (items, close) = plan(between).decode(body, &|j: Job| j.job_id).unwrap();
        assert_eq!((items, body[close]), (vec![1, 2], b']'));
    }

    #[test]
    fn threads_give_what_one_thread_gives() {
        let body = body(3_000);
        assert!(Plan::new(&body, "jobs", 4).is_some());
        let (reply, items) = read(body.clone()).unwrap();
        assert_eq!(reply.value.last_update, Some(7));
        assert_eq!(reply.value.jobs.as_deref().map(<[Job]>::len), Some(0));
        let whole: Jobs = serde_json::from_slice(&body).unwrap();
        let whole: Vec<_> = whole
            .jobs
            .unwrap()
            .into_iter()
            .map(|j| (j.job_id, j.name))
            .collect();
        assert_eq!(items, whole);
    }

    #[test]
    fn large_bodies_decode_in_a_task_of_either_runtime() {
        use tokio::runtime::Builder;
        for runtime in [
            Builder::new_multi_thread().worker_threads(2).build(),
            Builder::new_current_thread().build(),
        ] {
            let body = body(3_000);
            let listed = runtime.unwrap().block_on(async move {
                tokio::spawn(async move { read(body).unwrap().1.len() })
                    .await
                    .unwrap()
            });
            assert_eq!(listed, 3_000);
        }
    }

    #[test]
    fn small_or_compact_bodies_are_decoded_whole() {
        assert!(Plan::new(&body(10), "jobs", 4).is_none());
        let compact =
            serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&body(3_000)).unwrap())
                .unwrap();
        assert!(Plan::new(&compact, "jobs", 4).is_none());
        assert!(Plan::new(&body(3_000), "jobs", 1).is_none());
        assert_eq!(read(compact).unwrap().1.len(), 3_000);
    }

    #[test]
    fn a_bad_element_gives_the_one_thread_error() {
        let mut body = String::from_utf8(body(3_000)).unwrap();
        let at = body.find("\"job_id\": 2500").unwrap();
        body.replace_range(at..at + 14, "\"job_id\": \"xx\"");
        let err = read(body.into_bytes()).unwrap_err();
        let Error::Decode { json_path, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(json_path, "jobs[2500].job_id");
    }

    #[test]
    fn errors_in_the_rest_win() {
        let mut body = String::from_utf8(body(3_000)).unwrap();
        body = body.replace(
            "\"errors\": []",
            "\"errors\": [{\"error_number\": 1, \"error\": \"boom\"}]",
        );
        assert!(Plan::new(body.as_bytes(), "jobs", 4).is_some());
        assert!(read(body.into_bytes()).is_err());
    }

    /// Every recorded job listing, its jobs repeated past a few runs, gives the same
    /// `JobList` pretty-printed (decoded on threads) as compact (decoded whole).
    #[test]
    fn recorded_listings_are_the_same_on_threads() {
        use crate::ApiVersion;
        use crate::model::JobQuery;
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        let mut compared = 0;
        for dir in std::fs::read_dir(fixtures).unwrap().flat_map(|release| {
            std::fs::read_dir(release.unwrap().path())
                .into_iter()
                .flatten()
                .map(|entry| entry.unwrap().path())
        }) {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let Ok(version) = name.parse::<ApiVersion>() else {
                continue;
            };
            if !version.is_compiled() {
                continue;
            }
            let file = dir.join("slurm_jobs.json").display().to_string();
            let mut doc: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            let jobs = doc["jobs"].as_array().unwrap().clone();
            assert!(!jobs.is_empty(), "{file}");
            doc["jobs"] = (0..300)
                .map(|i| {
                    let mut job = jobs[i % jobs.len()].clone();
                    job["job_id"] = (1000 + i).into();
                    job
                })
                .collect();
            let pretty = serde_json::to_vec_pretty(&doc).unwrap();
            let compact = serde_json::to_vec(&doc).unwrap();
            assert!(Plan::new(&pretty, "jobs", 4).is_some(), "{file}");
            assert!(Plan::new(&compact, "jobs", 4).is_none(), "{file}");
            let query = JobQuery::new();
            let threads = crate::ops::listing_from_body(version, &query, pretty).unwrap();
            let whole = crate::ops::listing_from_body(version, &query, compact).unwrap();
            assert_eq!(threads.value.jobs.len(), 300, "{file}");
            assert_eq!(threads.value, whole.value, "{file}");
            compared += 1;
        }
        assert!(compared > 0);
    }
}
