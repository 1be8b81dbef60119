//! Bringing the test ground up and down: etcd, then the API server, both on the host's loopback
//! only, then the ground's own processes ([`parts`]). Pods live in their own network namespaces and
//! reach the API server through netd, which forwards the Service default/kubernetes (ClusterIP
//! 10.96.0.1:443) to [`API_ADDR`]; the other way, the API server reaches webhooks behind Services
//! through netd's dial socket ([`state::netd_dial_socket`]).

use std::fs::OpenOptions;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::apiserver::{self, Built};
use super::parts;
use super::state::{self, Daemon, State};
use crate::slurm::Release;
use crate::slurm::process;

/// The API server, where kubeconfigs point.
pub const API_ADDR: &str = "127.0.0.1:6443";
/// etcd's client and peer ports: not etcd's defaults (2379/2380), so that a real etcd on the
/// machine does not clash; both on 127.0.0.1 only.
const ETCD_CLIENT: &str = "127.0.0.1:2479";
const ETCD_PEER: &str = "127.0.0.1:2480";
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
const START_TIMEOUT: Duration = Duration::from_secs(90);

pub struct Shape {
    pub nodes: u32,
    pub slurm: Option<Release>,
    pub hollow: Option<state::Hollow>,
}

/// The recorded ground, when any of its processes is alive.
pub fn running() -> Result<Option<State>> {
    Ok(State::load()?.filter(|s| s.daemons.iter().any(is_ours)))
}

fn is_ours(d: &Daemon) -> bool {
    process::is_running(d.pid)
        && process::cmdline(d.pid)
            .first()
            .is_some_and(|argv0| Path::new(argv0) == d.program)
}

pub fn up(shape: &Shape, workspace: &Path) -> Result<(State, Built)> {
    if running()?.is_some() {
        bail!(
            "the Kubernetes test ground is already running (`cargo xtask kube status`); \
             stop it first with `cargo xtask kube down`"
        );
    }
    let built = apiserver::ensure(workspace)?;
    parts::prepare(workspace)?;
    // Leftovers of a crashed run must not leak into the new ground.
    down()?;
    for addr in [API_ADDR, ETCD_CLIENT, ETCD_PEER, parts::KUBELET_API_ADDR] {
        TcpListener::bind(addr).map_err(|e| {
            anyhow::anyhow!(
                "{addr} is taken ({e}): the test ground needs it (API server 6443, etcd 2479/2480, kubelet API 10450)"
            )
        })?;
    }
    let mut state = State {
        nodes: shape.nodes,
        slurm: shape.slurm,
        hollow: shape.hollow.clone(),
        kubectl: built.kubectl.clone(),
        daemons: Vec::new(),
    };
    std::fs::create_dir_all(state::log_dir())?;
    state.save()?;
    let started = Instant::now();
    match start(&mut state, &built) {
        Ok(()) => {
            eprintln!("Kubernetes test ground up in {:.1?}", started.elapsed());
            Ok((state, built))
        }
        Err(e) => {
            let _ = down();
            Err(e.context(format!(
                "starting the Kubernetes test ground failed (stopped again; logs in {})",
                state::log_dir().display()
            )))
        }
    }
}

/// Each ground starts with an empty audit log: an earlier ground's requests would count in RBAC checks,
/// and its rotated files would fill /run (a tmpfs) ground after ground.
fn remove_audit_logs(logs: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(logs) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        other => other.with_context(|| format!("listing {}", logs.display()))?,
    };
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("audit") && name.ends_with(".log") {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

fn start(state: &mut State, built: &Built) -> Result<()> {
    let logs = state::log_dir();
    remove_audit_logs(&logs)?;
    let etcd_dir = state::etcd_dir();
    if etcd_dir.exists() {
        std::fs::remove_dir_all(&etcd_dir)
            .with_context(|| format!("removing {}", etcd_dir.display()))?;
    }
    spawn(
        state,
        "etcd",
        &built.etcd,
        &[
            "--name=ground".to_owned(),
            format!("--data-dir={}", etcd_dir.display()),
            format!("--listen-client-urls=http://{ETCD_CLIENT}"),
            format!("--advertise-client-urls=http://{ETCD_CLIENT}"),
            format!("--listen-peer-urls=http://{ETCD_PEER}"),
            format!("--initial-advertise-peer-urls=http://{ETCD_PEER}"),
            format!("--initial-cluster=ground=http://{ETCD_PEER}"),
            "--listen-metrics-urls=".to_owned(),
            // a throw-away store: speed over durability
            "--unsafe-no-fsync".to_owned(),
        ],
    )?;
    wait_listening(state, ETCD_CLIENT, "etcd", &logs.join("etcd.log"))?;
    age_etcd().context("writing etcd's first revisions")?;
    let pki = state::pki_dir();
    spawn(
        state,
        "apiserver",
        &built.apiserver,
        &[
            format!("--data-dir={}", pki.display()),
            format!("--etcd-servers=http://{ETCD_CLIENT}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={}", port(API_ADDR)),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            format!("--audit-log-path={}", state::audit_log().display()),
            format!("--token-auth-file={}", pki.join("tokens.csv").display()),
            // netd, started after the API server, makes it; until then a webhook of a Service
            // fails to be called (and the API server does not mind)
            format!("--netd-dial-socket={}", state::netd_dial_socket().display()),
        ],
    )?;
    wait_listening(
        state,
        API_ADDR,
        "the API server",
        &logs.join("apiserver.log"),
    )?;
    let kubeconfig = state::kubeconfig();
    std::fs::copy(pki.join("admin.kubeconfig"), &kubeconfig)
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    wait_ready(state)?;
    parts::start(state, &built.apiserver, spawn)?;
    write_env_file(state)
}

/// Moves the fresh store's revision past 1, as in a cluster that has lived a while: the API
/// server's watch caches then start above the first resourceVersions, and a watch from one of
/// those gets 410 Gone, which clients must handle. Writes through etcd's JSON gateway a key
/// outside the API server's prefix.
fn age_etcd() -> Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    // base64 of "/slurm-dev/ground" and of "started"
    let body = r#"{"key":"L3NsdXJtLWRldi9ncm91bmQ=","value":"c3RhcnRlZA=="}"#;
    for _ in 0..ETCD_AGE {
        agent
            .post(format!("http://{ETCD_CLIENT}/v3/kv/put"))
            .header("Content-Type", "application/json")
            .send(body)?;
    }
    Ok(())
}

/// How many revisions [`age_etcd`] writes: resourceVersions below this are too old from the start.
const ETCD_AGE: u32 = 10;

fn port(addr: &str) -> u16 {
    addr.parse::<SocketAddr>().expect("a socket address").port()
}

fn spawn(state: &mut State, name: &str, program: &Path, args: &[String]) -> Result<()> {
    let log = state::log_dir().join(format!("{name}.log"));
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let mut cmd = Command::new(program);
    crate::slurm::process::keep_no_inherited_files(&mut cmd);
    let child = cmd
        .args(args)
        .env("KUBECONFIG", state::kubeconfig())
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {name} ({})", program.display()))?;
    state.daemons.push(Daemon {
        name: name.to_owned(),
        pid: child.id(),
        program: program.to_owned(),
    });
    state.save()
}

fn wait_listening(state: &State, addr: &str, what: &str, log: &Path) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let addr: SocketAddr = addr.parse().expect("a socket address");
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Some(dead) = state.daemons.iter().find(|d| !process::is_running(d.pid)) {
            bail!("{} exited while starting; see {}", dead.name, log.display());
        }
        if Instant::now() >= deadline {
            bail!(
                "{what} did not listen on {addr} within {START_TIMEOUT:?}; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_ready(state: &State) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let log = state::log_dir().join("apiserver.log");
    loop {
        let out = kubectl(state)
            .args(["get", "--raw", "/readyz"])
            .stderr(Stdio::null())
            .output()
            .context("running kubectl")?;
        if out.status.success() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "the API server did not answer /readyz on {API_ADDR} within {START_TIMEOUT:?}; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub fn kubectl(state: &State) -> Command {
    let mut cmd = Command::new(&state.kubectl);
    cmd.env("KUBECONFIG", state::kubeconfig());
    cmd
}

/// `kubectl ARGS` on the ground: its output, or an error with what kubectl said.
pub fn kubectl_output(state: &State, args: &[&str]) -> Result<String> {
    let out = kubectl(state).args(args).output()?;
    if !out.status.success() {
        bail!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write_env_file(state: &State) -> Result<()> {
    let mut env = format!(
        "# The Kubernetes test ground (cargo xtask kube up)\nKUBECONFIG={}\nKUBE_GROUND_API=https://{API_ADDR}\nKUBE_GROUND_AUDIT_LOG={}\nKUBE_GROUND_KUBECTL={}\nKUBE_GROUND_NODES={}\nKUBE_GROUND_NODE_NAMES={}\nKUBE_GROUND_TOKEN_FILE={}\nKUBE_GROUND_HOLLOW_NODES={}\n",
        state::kubeconfig().display(),
        state::audit_log().display(),
        state.kubectl.display(),
        state.nodes,
        parts::node_names(state).join(","),
        state::pki_dir().join("tokens.csv").display(),
        state.hollow.as_ref().map_or(0, |h| h.nodes),
    );
    if let Some(release) = state.slurm {
        env.push_str(&format!(
            "KUBE_GROUND_SLURM_ENV={}\n",
            crate::slurm::state::env_file(release).display()
        ));
    }
    let path = state::env_file();
    std::fs::write(&path, env).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// Stops what the state file records (the API server first), whatever state `up` left it in.
/// Returns whether anything was running.
pub fn down() -> Result<bool> {
    // The demo's Prometheus runs inside the ground's network namespace, beside it.
    let prometheus = crate::demo::prometheus::stop()?;
    let Some(state) = State::load()? else {
        return Ok(prometheus);
    };
    let mut any = false;
    for d in state.daemons.iter().rev() {
        if is_ours(d) {
            any = true;
            let killed = process::stop(&[d.pid], Duration::from_secs(10));
            if !killed.is_empty() {
                eprintln!("{} (pid {}) did not stop on SIGTERM: killed", d.name, d.pid);
            }
        }
    }
    parts::clean_up();
    for path in [
        state::env_file(),
        state::kubeconfig(),
        state::netd_dial_socket(),
    ] {
        let _ = std::fs::remove_file(path);
    }
    let _ = std::fs::remove_dir_all(state::etcd_dir());
    State::remove()?;
    Ok(any)
}
