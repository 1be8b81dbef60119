//! The demo's Prometheus: Debian's, inside the ground's network namespace as if it ran in a pod,
//! scraping what the ServiceMonitors on the ground select (the charts' and the operator's, read
//! from the API server as prometheus-operator reads them), with the exporter's alert rules, and
//! reachable from the host at [`HOST_ADDR`]. It keeps running after `cargo xtask demo`; the demo's
//! `--down` and `cargo xtask kube down` stop it.
//!
//! Debian builds Prometheus without Kubernetes discovery, so a companion process
//! (`cargo xtask demo prometheus-serve`, started here) does it: every [`REFRESH`] it reads the
//! ServiceMonitors, Services, EndpointSlices and pods, rewrites the file-based discovery
//! ([`super::scrape`]), and reloads Prometheus when the ServiceMonitors changed. It also holds the
//! host port, forwarding it into the namespace ([`super::forward`]).

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::{forward, netns, scrape};
use crate::kube::ground;
use crate::kube::state::{self as kube_state, State};
use crate::slurm::process;

/// Where a browser on this machine reaches it.
pub const HOST_ADDR: &str = "127.0.0.1:9090";
/// Where it listens inside the ground (the namespace's own loopback; tests use 20000 and up).
const INSIDE_ADDR: &str = "127.0.0.1:19090";
/// How often the targets are discovered again.
const REFRESH: Duration = Duration::from_secs(10);
/// The exporter chart's rules, loaded as they are.
const RULES: &str = "slurm-exporter/charts/slurm-exporter/rules/slurm.rules.yaml";

/// `/run/slurm-dev/prometheus-demo`: configuration, discovery files, data, pids, logs.
fn dir() -> PathBuf {
    kube_state::run_dir()
        .parent()
        .unwrap_or(Path::new("/run/slurm-dev"))
        .join("prometheus-demo")
}

/// Starts it (stopping one of an earlier demo first) and waits until it answers at [`HOST_ADDR`].
pub fn start(state: &State, workspace: &Path) -> Result<()> {
    crate::slurm::rootfs::ensure_program("prometheus", "prometheus")?;
    stop()?;
    // The companion binds it later, detached: a port taken is said here.
    drop(TcpListener::bind(HOST_ADDR).with_context(|| format!("{HOST_ADDR} is taken"))?);
    let dir = dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let rules = workspace.join(RULES);
    std::fs::write(dir.join("rules-file"), rules.display().to_string())?;
    discover(state, &dir, None)?;

    let resolv = dir.join("resolv.conf-inside");
    netns::write_private(&resolv, netns::RESOLV_CONF)?;
    let args = [
        format!("--config.file={}", dir.join("prometheus.yml").display()),
        format!("--storage.tsdb.path={}", dir.join("data").display()),
        format!("--web.listen-address={INSIDE_ADDR}"),
        "--storage.tsdb.retention.time=1d".into(),
    ];
    // No API server access: it reads only its files. The kubeconfig argument is the wrapper's.
    let prometheus = netns::command(
        &resolv,
        Path::new("/dev/null"),
        OsStr::new("prometheus"),
        args,
    )
    .stdin(Stdio::null())
    .stdout(log(&dir, "prometheus.log")?)
    .stderr(log(&dir, "prometheus.log")?)
    .process_group(0)
    .spawn()
    .context("starting prometheus inside the ground (ip netns exec)")?;
    std::fs::write(dir.join("prometheus.pid"), prometheus.id().to_string())?;
    let serve = Command::new(std::env::current_exe()?)
        .args(["demo", "prometheus-serve"])
        .stdin(Stdio::null())
        .stdout(log(&dir, "serve.log")?)
        .stderr(log(&dir, "serve.log")?)
        .process_group(0)
        .spawn()
        .context("starting `cargo xtask demo prometheus-serve`")?;
    std::fs::write(dir.join("serve.pid"), serve.id().to_string())?;

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .into();
    let deadline = Instant::now() + Duration::from_secs(60);
    while agent
        .get(format!("http://{HOST_ADDR}/-/ready"))
        .call()
        .is_err()
    {
        if Instant::now() > deadline {
            bail!(
                "Prometheus did not answer at {HOST_ADDR} within 60 s; see {} and {}",
                dir.join("prometheus.log").display(),
                dir.join("serve.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

fn log(dir: &Path, name: &str) -> Result<std::fs::File> {
    let path = dir.join(name);
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))
}

/// `cargo xtask demo prometheus-serve`: the companion [`start`] leaves running.
pub fn serve() -> Result<()> {
    let listener = TcpListener::bind(HOST_ADDR).with_context(|| format!("binding {HOST_ADDR}"))?;
    let inside = INSIDE_ADDR.parse().expect("a socket address");
    std::thread::spawn(move || forward::forward(listener, inside));
    let dir = dir();
    let mut last = None;
    loop {
        std::thread::sleep(REFRESH);
        let Some(state) = State::load()? else {
            bail!("the test ground is gone");
        };
        match discover(&state, &dir, last.as_ref()) {
            Ok(monitors) => last = Some(monitors),
            // Kept going: the next round may find the API server back.
            Err(e) => eprintln!("discovery: {e:#}"),
        }
    }
}

/// Writes the configuration from the ServiceMonitors on the ground (reloading Prometheus when
/// they differ from `last`, the ones of the configuration it runs) and every job's targets; the
/// ServiceMonitors.
fn discover(state: &State, dir: &Path, last: Option<&Value>) -> Result<Value> {
    let list = |what: &str, ns: Option<&str>| -> Result<Vec<Value>> {
        let mut args = vec!["get", what, "-o", "json"];
        match ns {
            Some(ns) => args.extend(["-n", ns]),
            None => args.push("-A"),
        }
        let text = ground::kubectl_output(state, &args)?;
        let list: Value = serde_json::from_str(&text).context("kubectl -o json")?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    };
    let monitors = Value::Array(list("servicemonitors", None)?);
    let jobs = scrape::jobs(monitors.as_array().expect("an array")).map_err(|e| anyhow!(e))?;
    if last != Some(&monitors) {
        write_config(dir, &jobs)?;
        if last.is_some() {
            reload(dir)?;
        }
    }
    let mut namespaces: Vec<&String> = jobs.iter().flat_map(|j| &j.namespaces).collect();
    namespaces.sort();
    namespaces.dedup();
    let mut objects = Vec::new();
    for ns in namespaces {
        objects.extend(list("services,endpointslices,pods", Some(ns))?);
    }
    for (i, job) in jobs.iter().enumerate() {
        let path = dir.join(format!("targets-{i}.json"));
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, job.targets(&objects).to_string())?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(monitors)
}

fn write_config(dir: &Path, jobs: &[scrape::ScrapeJob]) -> Result<()> {
    let rules = std::fs::read_to_string(dir.join("rules-file"))?;
    let configs: Vec<Value> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| j.config(&dir.join(format!("targets-{i}.json"))))
        .collect();
    // JSON is YAML: Prometheus reads it as its configuration.
    let config = json!({
        "global": {"scrape_interval": "30s", "evaluation_interval": "30s"},
        "rule_files": [rules],
        "scrape_configs": configs,
    });
    let path = dir.join("prometheus.yml");
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    let check = Command::new("promtool")
        .arg("check")
        .arg("config")
        .arg(&path)
        .output()
        .context("promtool (Debian's prometheus package)")?;
    if !check.status.success() {
        bail!(
            "promtool check config {}:\n{}{}",
            path.display(),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
    Ok(())
}

/// SIGHUP: Prometheus reads its configuration again.
fn reload(dir: &Path) -> Result<()> {
    let pid = pid(dir, "prometheus.pid").context("Prometheus is not running")?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGHUP,
    )?;
    Ok(())
}

/// The pid in `dir/file`, while that process still runs.
fn pid(dir: &Path, file: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    process::is_running(pid).then_some(pid)
}

/// Stops the companion and Prometheus, if they run, and removes their directory; whether they
/// ran.
pub fn stop() -> Result<bool> {
    let dir = dir();
    let mut any = false;
    for (file, program) in [("serve.pid", "xtask"), ("prometheus.pid", "prometheus")] {
        let Some(pid) = pid(&dir, file) else { continue };
        // A pid reused by another program is left alone.
        let ours = process::cmdline(pid)
            .first()
            .is_some_and(|argv0| Path::new(argv0).file_name() == Some(program.as_ref()));
        if ours {
            process::stop(&[pid], Duration::from_secs(10));
            any = true;
        }
        let _ = std::fs::remove_file(dir.join(file));
    }
    // Its data sit in /run, in memory.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(any)
}
