//! `cargo xtask fixtures record`: real slurmrestd responses for slurm-client's decode tests
//! and benchmarks, stored under `slurm-client/tests/fixtures/<release>/<version>/<name>.json`.
//!
//! For each release it uses the running dev cluster (or starts one with accounting and stops
//! it afterwards), creates a little state (jobs in several states, a reservation) so lists are
//! not empty, GETs a fixed list of endpoints for every REST version the release serves (only
//! those in that version's committed spec), and removes the state again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use crate::slurm::{self, Release, UpArgs};

#[derive(Debug, Subcommand)]
pub enum FixturesCmd {
    /// Record the fixtures from real Slurm clusters (started here if none is running; needs root).
    Record {
        /// Only this release (default: 24.11 and 26.05).
        #[arg(long)]
        release: Option<Release>,
    },
}

pub fn run(workspace: &Path, cmd: FixturesCmd) -> Result<()> {
    let FixturesCmd::Record { release } = cmd;
    for release in release.map_or(Release::ALL.to_vec(), |r| vec![r]) {
        let started = if slurm::running(release)?.is_none() {
            eprintln!("no Slurm {release} cluster is running: starting one with accounting");
            slurm::up(&UpArgs {
                release,
                nodes: 4,
                accounting: true,
                port: None,
            })?;
            true
        } else {
            false
        };
        let result = record_release(workspace, release);
        if started {
            slurm::down(release)?;
        }
        result?;
    }
    Ok(())
}

/// Where a fixture's path parameter comes from.
#[derive(Clone, Copy)]
enum Param {
    None,
    RunningJob,
    ArrayJob,
    CompletedJob,
    UnknownJob,
    Node,
    Partition,
    Reservation,
    Account,
    User,
    Cluster,
    Qos,
}

/// Fixture name, path as written in the spec (`{v}` is the version), parameter.
const ENDPOINTS: &[(&str, &str, Param)] = &[
    ("slurm_ping", "/slurm/{v}/ping/", Param::None),
    ("slurm_diag", "/slurm/{v}/diag/", Param::None),
    ("slurm_jobs", "/slurm/{v}/jobs/", Param::None),
    ("slurm_jobs_state", "/slurm/{v}/jobs/state/", Param::None),
    ("slurm_job", "/slurm/{v}/job/{job_id}", Param::RunningJob),
    (
        "slurm_job_array",
        "/slurm/{v}/job/{job_id}",
        Param::ArrayJob,
    ),
    (
        "slurm_job_unknown",
        "/slurm/{v}/job/{job_id}",
        Param::UnknownJob,
    ),
    (
        "slurm_resources",
        "/slurm/{v}/resources/{job_id}",
        Param::RunningJob,
    ),
    ("slurm_nodes", "/slurm/{v}/nodes/", Param::None),
    ("slurm_node", "/slurm/{v}/node/{node_name}", Param::Node),
    ("slurm_partitions", "/slurm/{v}/partitions/", Param::None),
    (
        "slurm_partition",
        "/slurm/{v}/partition/{partition_name}",
        Param::Partition,
    ),
    (
        "slurm_reservations",
        "/slurm/{v}/reservations/",
        Param::None,
    ),
    (
        "slurm_reservation",
        "/slurm/{v}/reservation/{reservation_name}",
        Param::Reservation,
    ),
    ("slurm_licenses", "/slurm/{v}/licenses/", Param::None),
    ("slurm_shares", "/slurm/{v}/shares", Param::None),
    ("slurm_conf", "/slurm/{v}/conf", Param::None),
    ("slurmdb_ping", "/slurmdb/{v}/ping/", Param::None),
    ("slurmdb_diag", "/slurmdb/{v}/diag/", Param::None),
    ("slurmdb_config", "/slurmdb/{v}/config", Param::None),
    ("slurmdb_conf", "/slurmdb/{v}/conf", Param::None),
    ("slurmdb_accounts", "/slurmdb/{v}/accounts/", Param::None),
    (
        "slurmdb_account",
        "/slurmdb/{v}/account/{account_name}",
        Param::Account,
    ),
    ("slurmdb_users", "/slurmdb/{v}/users/", Param::None),
    ("slurmdb_user", "/slurmdb/{v}/user/{name}", Param::User),
    (
        "slurmdb_associations",
        "/slurmdb/{v}/associations/",
        Param::None,
    ),
    ("slurmdb_qos", "/slurmdb/{v}/qos/", Param::None),
    ("slurmdb_qos_one", "/slurmdb/{v}/qos/{qos}", Param::Qos),
    ("slurmdb_tres", "/slurmdb/{v}/tres/", Param::None),
    ("slurmdb_clusters", "/slurmdb/{v}/clusters/", Param::None),
    (
        "slurmdb_cluster",
        "/slurmdb/{v}/cluster/{cluster_name}",
        Param::Cluster,
    ),
    ("slurmdb_wckeys", "/slurmdb/{v}/wckeys/", Param::None),
    ("slurmdb_instances", "/slurmdb/{v}/instances/", Param::None),
    ("slurmdb_jobs", "/slurmdb/{v}/jobs/", Param::None),
    (
        "slurmdb_job",
        "/slurmdb/{v}/job/{job_id}",
        Param::CompletedJob,
    ),
];

/// Job lists are cut down to the jobs created here (other tests may share the cluster).
const JOB_LISTS: &[&str] = &["slurm_jobs", "slurm_jobs_state", "slurmdb_jobs"];

const RESERVATION: &str = "fixtures";
const UNKNOWN_JOB: u32 = 999_999;

fn record_release(workspace: &Path, release: Release) -> Result<()> {
    let env = ClusterEnv::read(release)?;
    let newest = *release.rest_versions().last().expect("versions");
    let state = Created::new(release, &env)?;
    let result = (|| {
        state.wait_until_ready(&env, newest)?;
        let dir = workspace
            .join("slurm-client/tests/fixtures")
            .join(release.name());
        record_versions(workspace, release, &env, &state, &dir)
    })();
    state.clean_up();
    result
}

fn record_versions(
    workspace: &Path,
    release: Release,
    env: &ClusterEnv,
    state: &Created,
    dir: &Path,
) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let ours = state.job_ids();
    let mut index = BTreeMap::new();
    let mut full_release = None;
    for version in release.rest_versions() {
        let spec = read_spec(workspace, version)?;
        let vdir = dir.join(version);
        std::fs::create_dir_all(&vdir).with_context(|| format!("creating {}", vdir.display()))?;
        let mut recorded = BTreeMap::new();
        for (name, spec_path, param) in ENDPOINTS {
            let spec_path = spec_path.replace("{v}", version);
            if spec["paths"][&spec_path]["get"].is_null() {
                continue;
            }
            let path = match state.param(*param, env) {
                Some(value) => substitute(&spec_path, &value),
                None => spec_path.clone(),
            };
            let (status, body) = env.get(&path)?;
            let file = vdir.join(format!("{name}.json"));
            let text = match serde_json::from_slice::<Value>(&body) {
                Ok(mut value) => {
                    if JOB_LISTS.contains(name) {
                        keep_jobs(&mut value, &ours);
                    }
                    if let Some(r) = value["meta"]["slurm"]["release"].as_str() {
                        full_release.get_or_insert_with(|| r.to_string());
                    }
                    recorded.insert(*name, json!({ "path": path, "status": status }));
                    serde_json::to_string_pretty(&value)? + "\n"
                }
                Err(e) if !(200..300).contains(&status) => {
                    eprintln!("  {version} {name}: status {status}, not JSON ({e}): skipped");
                    continue;
                }
                // Kept as sent: some releases print invalid JSON (a bare `Infinity`), and
                // the decode tests must see it.
                Err(e) => {
                    eprintln!(
                        "  {version} {name}: status {status}, INVALID JSON kept as sent: {e}"
                    );
                    recorded.insert(
                        *name,
                        json!({ "path": path, "status": status, "invalid_json": e.to_string() }),
                    );
                    String::from_utf8_lossy(&body).into_owned()
                }
            };
            std::fs::write(&file, &text).with_context(|| format!("writing {}", file.display()))?;
            eprintln!("  {version} {name}: {status}, {} bytes", text.len());
        }
        index.insert(*version, recorded);
    }
    let meta = json!({
        "release": full_release,
        "recorded_with": "cargo xtask fixtures record",
        "jobs": state.describe(),
        "fixtures": index,
    });
    let file = dir.join("recorded.json");
    std::fs::write(&file, serde_json::to_string_pretty(&meta)? + "\n")?;
    eprintln!("Slurm {release}: fixtures in {}", dir.display());
    Ok(())
}

fn read_spec(workspace: &Path, version: &str) -> Result<Value> {
    let path = workspace.join("openapi").join(format!("{version}.json"));
    let raw = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&raw).with_context(|| format!("parsing {}", path.display()))
}

/// Replaces the one `{param}` in a spec path.
fn substitute(spec_path: &str, value: &str) -> String {
    match (spec_path.find('{'), spec_path.find('}')) {
        (Some(start), Some(end)) => {
            format!("{}{value}{}", &spec_path[..start], &spec_path[end + 1..])
        }
        _ => spec_path.to_string(),
    }
}

/// Keeps only the entries of `jobs[]` that belong to the jobs created here.
fn keep_jobs(value: &mut Value, ours: &BTreeSet<i64>) {
    if let Some(Value::Array(jobs)) = value.get_mut("jobs") {
        jobs.retain(|job| job_ids(job).iter().any(|id| ours.contains(id)));
    }
}

/// The ids a job entry can be known by: its own, its array's (plain or `{number}`).
fn job_ids(job: &Value) -> Vec<i64> {
    let number = |v: &Value| v.as_i64().or_else(|| v["number"].as_i64());
    [
        &job["job_id"],
        &job["array_job_id"],
        &job["array"]["job_id"],
    ]
    .into_iter()
    .filter_map(number)
    .filter(|id| *id != 0)
    .collect()
}

/// What the cluster's env file says, and a blocking HTTP client for its slurmrestd.
struct ClusterEnv {
    url: String,
    token: Token,
    user: String,
    cluster: String,
    agent: ureq::Agent,
}

/// A JWT: never printed.
struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl ClusterEnv {
    fn read(release: Release) -> Result<ClusterEnv> {
        let path = slurm::state::env_file(release);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {}: start the cluster with `cargo xtask slurm up --release {release} --accounting`",
                path.display()
            )
        })?;
        let vars: BTreeMap<&str, &str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .collect();
        let var = |key: &str| {
            vars.get(key)
                .map(|v| v.to_string())
                .with_context(|| format!("{} has no {key}", path.display()))
        };
        if var("SLURM_ACCOUNTING")? != "1" {
            bail!(
                "the Slurm {release} cluster runs without accounting: restart it with \
                 `cargo xtask slurm down --release {release} && cargo xtask slurm up --release {release} --accounting`"
            );
        }
        let url = var("SLURM_REST_URL")?;
        let host = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split(':').next())
            .unwrap_or_default();
        if !host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
        {
            bail!(
                "SLURM_REST_URL {url:?} in {} is not a loopback address",
                path.display()
            );
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Ok(ClusterEnv {
            url,
            token: Token(var("SLURM_JWT")?),
            user: var("SLURM_USER_NAME")?,
            cluster: var("SLURM_CLUSTER_NAME")?,
            agent,
        })
    }

    /// GET `path`: the status and the body.
    fn get(&self, path: &str) -> Result<(u16, Vec<u8>)> {
        let mut response = self
            .agent
            .get(format!("{}{path}", self.url))
            .header("X-SLURM-USER-TOKEN", &self.token.0)
            .header("X-SLURM-USER-NAME", &self.user)
            .call()
            .with_context(|| format!("GET {path}"))?;
        let body = response
            .body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_vec()
            .with_context(|| format!("GET {path}: reading the body"))?;
        Ok((response.status().as_u16(), body))
    }

    /// GET `path` as JSON, whatever the status.
    fn get_json(&self, path: &str) -> Result<Value> {
        let (status, body) = self.get(path)?;
        serde_json::from_slice(&body)
            .with_context(|| format!("GET {path}: status {status}, body is not JSON"))
    }
}

/// The jobs and reservation created for the recording; removed by `clean_up`.
struct Created {
    release: Release,
    running: u32,
    array: u32,
    completed: u32,
    failed: u32,
    held: u32,
}

impl Created {
    fn new(release: Release, env: &ClusterEnv) -> Result<Created> {
        // A reservation left by an interrupted run would make `create` fail.
        let _ = exec(
            release,
            None,
            &[
                "scontrol",
                "delete",
                &format!("ReservationName={RESERVATION}"),
            ],
        );
        let mut ids = Vec::new();
        // Small jobs with a time limit: they share nodes, and fit before the reservation.
        let jobs: [(Option<&str>, &[&str]); 5] = [
            (None, &["-J", "fx-completed", "--wrap", "true"]),
            (None, &["-J", "fx-failed", "--wrap", "exit 3"]),
            (None, &["-J", "fx-running", "--wrap", "sleep 900"]),
            (
                None,
                &["-J", "fx-array", "--array=1-3", "--wrap", "sleep 900"],
            ),
            (
                Some("alice"),
                &["-J", "fx-held", "--hold", "--wrap", "sleep 60"],
            ),
        ];
        let created = (|| {
            for (user, args) in jobs {
                let mut argv = vec![
                    "sbatch",
                    "--parsable",
                    "--chdir=/tmp",
                    "-o",
                    "/dev/null",
                    "-n1",
                    "--mem=64M",
                    "-t",
                    "30",
                ];
                argv.extend_from_slice(args);
                let out = exec(release, user, &argv)?;
                let id = out
                    .trim()
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .parse::<u32>()
                    .with_context(|| format!("sbatch printed {out:?}, not a job id"))?;
                ids.push(id);
            }
            exec(
                release,
                None,
                &[
                    "scontrol",
                    "create",
                    "reservation",
                    &format!("ReservationName={RESERVATION}"),
                    "StartTime=now+1day",
                    "Duration=60",
                    "Nodes=node4",
                    &format!("Users={},alice", env.user),
                ],
            )?;
            Ok(())
        })();
        if let Err(e) = created {
            cancel(release, &ids);
            return Err(e);
        }
        Ok(Created {
            release,
            completed: ids[0],
            failed: ids[1],
            running: ids[2],
            array: ids[3],
            held: ids[4],
        })
    }

    fn job_ids(&self) -> BTreeSet<i64> {
        [
            self.running,
            self.array,
            self.completed,
            self.failed,
            self.held,
        ]
        .into_iter()
        .map(i64::from)
        .collect()
    }

    fn describe(&self) -> Value {
        json!({
            "running": self.running,
            "array": self.array,
            "completed": self.completed,
            "failed": self.failed,
            "held": self.held,
            "unknown": UNKNOWN_JOB,
            "reservation": RESERVATION,
        })
    }

    fn param(&self, param: Param, env: &ClusterEnv) -> Option<String> {
        Some(match param {
            Param::None => return None,
            Param::RunningJob => self.running.to_string(),
            Param::ArrayJob => self.array.to_string(),
            Param::CompletedJob => self.completed.to_string(),
            Param::UnknownJob => UNKNOWN_JOB.to_string(),
            Param::Node => "node1".into(),
            Param::Partition => "debug".into(),
            Param::Reservation => RESERVATION.into(),
            Param::Account => "science".into(),
            Param::User => env.user.clone(),
            Param::Cluster => env.cluster.clone(),
            Param::Qos => "normal".into(),
        })
    }

    /// Waits until the jobs reached the states the fixtures should show, in slurmctld and
    /// in slurmdbd.
    fn wait_until_ready(&self, env: &ClusterEnv, version: &str) -> Result<()> {
        let wanted = [
            (self.running, "RUNNING"),
            (self.array, "RUNNING"),
            (self.completed, "COMPLETED"),
            (self.failed, "FAILED"),
            (self.held, "PENDING"),
        ];
        // slurmdbd may not list a held job until it becomes eligible.
        let in_dbd = |id: u32| id != self.held;
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut next_report = Instant::now() + Duration::from_secs(20);
        loop {
            let mut missing = Vec::new();
            for (id, state) in wanted {
                let ctld = env.get_json(&format!("/slurm/{version}/job/{id}"))?;
                let recorded = !in_dbd(id)
                    || has_state(
                        &env.get_json(&format!("/slurmdb/{version}/job/{id}"))?,
                        state,
                    );
                if !has_state(&ctld, state) || !recorded {
                    missing.push(format!("{id} {state}"));
                }
            }
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() > next_report {
                eprintln!("  waiting for jobs: {}", missing.join(", "));
                next_report += Duration::from_secs(20);
            }
            if Instant::now() > deadline {
                bail!(
                    "jobs did not reach their states in time: {}",
                    missing.join(", ")
                );
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    fn clean_up(&self) {
        cancel(self.release, &[self.running, self.array, self.held]);
        if let Err(e) = exec(
            self.release,
            None,
            &[
                "scontrol",
                "delete",
                &format!("ReservationName={RESERVATION}"),
            ],
        ) {
            eprintln!("warning: could not delete reservation {RESERVATION}: {e:#}");
        }
    }
}

/// Whether any job record in a `jobs[]` response is in `state` (a string, or the first of a
/// state list, or `state.current` in slurmdbd's answers).
fn has_state(response: &Value, state: &str) -> bool {
    let first = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    response["jobs"].as_array().is_some_and(|jobs| {
        jobs.iter().any(|job| {
            first(&job["job_state"])
                .or_else(|| first(&job["state"]["current"]))
                .as_deref()
                == Some(state)
        })
    })
}

fn cancel(release: Release, ids: &[u32]) {
    if ids.is_empty() {
        return;
    }
    let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
    let mut argv = vec!["scancel"];
    argv.extend(ids.iter().map(String::as_str));
    if let Err(e) = exec(release, None, &argv) {
        eprintln!("warning: could not cancel jobs {}: {e:#}", ids.join(" "));
    }
}

/// Runs a command inside the cluster (`cargo xtask slurm exec`), returning its stdout.
fn exec(release: Release, user: Option<&str>, argv: &[&str]) -> Result<String> {
    let mut cmd = Command::new(crate::THIS_BINARY);
    cmd.args(["slurm", "exec", "--release", release.name()]);
    if let Some(user) = user {
        cmd.args(["--user", user]);
    }
    cmd.arg("--").args(argv);
    let out = cmd
        .output()
        .with_context(|| format!("running {argv:?} in the cluster"))?;
    if !out.status.success() {
        bail!(
            "{argv:?} in the Slurm {release} cluster failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
