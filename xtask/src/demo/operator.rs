//! `cargo xtask demo operator`: a Slurm cluster made from Slinky-style custom resources by the
//! project's operator, on the Kubernetes test ground. The operator runs as it would in a pod: inside
//! the ground's network namespace (started the way the operator's tests start it, through
//! [`netns`]), watching only namespace [`NAMESPACE`]. It is left running; Ctrl-C or
//! `cargo xtask demo operator --down` stops it and deletes the namespace.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::netns;
use crate::kube::{ground, state as kube_state};
use crate::slurm::process;

/// Slinky-style manifests: Controller + RestApi + NodeSet of 3 + Token (the operator's tests use
/// the same file).
const MANIFEST: &str = include_str!("../../../slurm-operator/tests/manifests/cluster.yaml");
pub const NAMESPACE: &str = "slurm-demo";
const CONTROLLER: &str = "slurm";
const NODESET: &str = "slurm-worker-slinky";
const WORKERS: &str = "3";
/// The login image, for a one-off pod that runs Slurm's client commands with a configless sackd.
const CLIENT_IMAGE: &str = "ghcr.io/slinkyproject/login:26.05-ubuntu26.04";
/// Inside the ground's network namespace, which every process there shares: not the defaults
/// (8080/8081), which tests may use; the webhook is off (its configuration is cluster-wide, and
/// the ground is shared).
const METRICS_ADDR: &str = "0.0.0.0:18080";
const HEALTH_ADDR: &str = "0.0.0.0:18081";
const CRDS: [&str; 6] = [
    "controllers",
    "nodesets",
    "loginsets",
    "restapis",
    "accountings",
    "tokens",
];
const READY_LIMIT: Duration = Duration::from_secs(600);
/// The test kubelet's container logs (CRI format).
const POD_LOGS: &str = "/var/lib/slurm-dev/kube/logs/pods";
/// The test kubelet's persistent volume claims, `<namespace>/<claim>-<uid>`: they outlive a deleted
/// namespace, so the demo removes those of an earlier one.
const CLAIMS_DIR: &str = "/var/lib/slurm-dev/kube/claims";

/// `/run/slurm-dev/operator-demo`: the operator's copy of the binary, its pid, log, kubeconfig.
fn demo_dir() -> PathBuf {
    kube_state::run_dir()
        .parent()
        .unwrap_or(Path::new("/run/slurm-dev"))
        .join("operator-demo")
}

fn pid_file() -> PathBuf {
    demo_dir().join("operator.pid")
}

fn log_file() -> PathBuf {
    demo_dir().join("operator.log")
}

fn binary() -> PathBuf {
    demo_dir().join("slurm-operator")
}

#[derive(Debug, clap::Args)]
pub struct OperatorArgs {
    /// Stop the demo's operator and delete namespace slurm-demo (the ground keeps running).
    #[arg(long)]
    down: bool,
}

pub fn run(workspace: &Path, args: &OperatorArgs) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the operator demo needs root (the Kubernetes test ground does)");
    }
    if args.down {
        return down();
    }
    if let Some(pid) = running_operator() {
        bail!(
            "the operator demo is already running (pid {pid}, log {}); stop it with `cargo xtask demo operator --down`",
            log_file().display()
        );
    }
    let state = match ground::running()? {
        Some(state) => {
            eprintln!("==> using the running Kubernetes test ground");
            state
        }
        None => {
            eprintln!("==> starting the Kubernetes test ground (3 nodes)");
            let shape = ground::Shape {
                nodes: 3,
                slurm: None,
                hollow: None,
            };
            ground::up(&shape, workspace)?.0
        }
    };
    let kubectl = |args: &[&str]| ground::kubectl_output(&state, args);
    let apply = |yaml: &str| -> Result<()> {
        let mut child = ground::kubectl(&state)
            .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), yaml.as_bytes())?;
        if !child.wait()?.success() {
            bail!("kubectl apply failed");
        }
        Ok(())
    };

    eprintln!("==> building the operator");
    let built = crate::unified::binaries(workspace, &["slurm-operator"])?.remove(0);
    // A copy: a later `cargo build` replaces target/debug/slurm-operator under a running process.
    std::fs::create_dir_all(demo_dir())?;
    std::fs::set_permissions(demo_dir(), std::fs::Permissions::from_mode(0o700))?;
    std::fs::copy(&built, binary()).context("copying the operator binary")?;

    println!("\n$ slurm-operator crds | kubectl apply --server-side -f -");
    let crds = Command::new(binary()).arg("crds").output()?;
    if !crds.status.success() {
        bail!("slurm-operator crds failed");
    }
    apply(&String::from_utf8(crds.stdout)?)?;
    for crd in CRDS {
        kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{crd}.slinky.slurm.net"),
        ])?;
    }

    // A fresh namespace: Secrets of an earlier run would not match a new cluster's state.
    if !kubectl(&[
        "get",
        "namespace",
        NAMESPACE,
        "--ignore-not-found",
        "-o",
        "name",
    ])?
    .is_empty()
    {
        eprintln!("==> deleting namespace {NAMESPACE} left from an earlier demo");
        kubectl(&["delete", "namespace", NAMESPACE, "--wait=true"])?;
    }
    let claims = Path::new(CLAIMS_DIR).join(NAMESPACE);
    if claims.exists() {
        std::fs::remove_dir_all(&claims)
            .with_context(|| format!("removing {} of an earlier demo", claims.display()))?;
    }
    println!("$ kubectl create namespace {NAMESPACE}");
    kubectl(&["create", "namespace", NAMESPACE])?;
    // The two key Secrets Slinky's chart makes (random 1024 characters each); from files, so that
    // the keys appear on no command line.
    for (secret, key) in [
        ("slurm-auth-slurm", "slurm.key"),
        ("slurm-auth-jwt", "jwt.key"),
    ] {
        println!("$ kubectl -n {NAMESPACE} create secret generic {secret} --from-file={key}=…");
        let file = demo_dir().join(key);
        netns::write_private(&file, &random_key()?)?;
        let from = format!("--from-file={key}={}", file.display());
        let made = kubectl(&[
            "-n", NAMESPACE, "create", "secret", "generic", secret, &from,
        ]);
        let _ = std::fs::remove_file(&file);
        made?;
    }

    // The manifests first, then the operator: its first reconciles see the whole cluster, so
    // slurmctld starts with every NodeSet in slurm.conf instead of restarting once they appear.
    let started = Instant::now();
    println!("$ kubectl -n {NAMESPACE} apply -f slurm-operator/tests/manifests/cluster.yaml");
    let applied = Command::new(&state.kubectl)
        .env("KUBECONFIG", kube_state::kubeconfig())
        .args(["-n", NAMESPACE, "apply", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), MANIFEST.as_bytes())?;
            child.wait()
        })?;
    if !applied.success() {
        bail!("applying the manifests failed");
    }

    let mut operator = start_operator()?;
    println!(
        "$ slurm-operator run --namespaces {NAMESPACE} …   (inside the ground's network, log {})",
        log_file().display()
    );
    eprintln!("==> waiting for slurmctld, slurmrestd and {WORKERS} workers");
    for (what, jsonpath, want) in [
        (
            format!("statefulset/{CONTROLLER}-controller"),
            "{.status.readyReplicas}",
            "1",
        ),
        (
            format!("deployment/{CONTROLLER}-restapi"),
            "{.status.readyReplicas}",
            "1",
        ),
        (
            format!("nodeset/{NODESET}"),
            "{.status.readyReplicas}",
            WORKERS,
        ),
        (format!("nodeset/{NODESET}"), "{.status.slurmIdle}", WORKERS),
    ] {
        loop {
            if let Some(status) = operator.try_wait()? {
                bail!(
                    "the operator exited ({status}); its log: {}",
                    log_file().display()
                );
            }
            let now = kubectl(&[
                "-n",
                NAMESPACE,
                "get",
                &what,
                "-o",
                &format!("jsonpath={jsonpath}"),
            ])
            .unwrap_or_default();
            if now == want {
                break;
            }
            if started.elapsed() > READY_LIMIT {
                let status = kubectl(&[
                    "-n",
                    NAMESPACE,
                    "get",
                    &format!("nodeset/{NODESET}"),
                    "-o",
                    "jsonpath={.status}",
                ])
                .unwrap_or_default();
                bail!(
                    "{what} {jsonpath} is {now:?}, not {want}, after {READY_LIMIT:?}\n  NodeSet status: {status}\n  the operator keeps running (log {}); `cargo xtask demo operator --down` stops it",
                    log_file().display()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    eprintln!(
        "==> cluster ready {:.0?} after the manifests were applied",
        started.elapsed()
    );
    println!("\n$ kubectl -n {NAMESPACE} get controllers,restapis,nodesets,tokens,pods");
    print!(
        "{}",
        kubectl(&[
            "-n",
            NAMESPACE,
            "get",
            "controllers,restapis,nodesets,tokens,pods"
        ])?
    );

    println!(
        "\n# from a pod with the login image (a configless sackd, as on a Slinky login node):"
    );
    let (code, output) = run_in_cluster(&kubectl, &apply, CLIENT_SCRIPT)?;
    print!("{output}");
    if code != 0 {
        bail!("the Slurm commands failed (exit code {code})");
    }

    let kubeconfig = kube_state::kubeconfig();
    println!(
        "\nThe cluster keeps running; the operator watches namespace {NAMESPACE}. Look around:
  cargo xtask kube kubectl -- -n {NAMESPACE} get nodesets,pods -o wide
  cargo xtask kube kubectl -- -n {NAMESPACE} get controller {CONTROLLER} -o yaml      # status: the Synced condition
  cargo xtask kube kubectl -- -n {NAMESPACE} get events.events.k8s.io -o custom-columns=OBJECT:.regarding.name,REASON:.reason,NOTE:.note
  cargo xtask kube kubectl -- -n {NAMESPACE} scale nodeset {NODESET} --replicas=1   # drains, then deletes
  cargo xtask kube kubectl -- -n {NAMESPACE} get configmap {CONTROLLER}-config -o jsonpath='{{.data.slurm\\.conf}}'
  cargo xtask kube exec -- curl -s http://127.0.0.1:{metrics}/metrics          # the operator's metrics
  tail -f {log}                                        # the operator's log
  (KUBECONFIG={kubeconfig} works with any kubectl)
Ctrl-C here, or `cargo xtask demo operator --down` elsewhere, stops the operator and deletes namespace {NAMESPACE}.",
        metrics = port(METRICS_ADDR),
        log = log_file().display(),
        kubeconfig = kubeconfig.display(),
    );

    // In the foreground until Ctrl-C (the operator has its own process group: the terminal's
    // SIGINT reaches only this process, which then stops it and cleans up).
    wait_for_interrupt(&mut operator)?;
    eprintln!("\n==> stopping");
    down()
}

/// Sources the Slurm client commands run in [`run_in_cluster`].
const CLIENT_SCRIPT: &str = r#"echo '$ sinfo'
sinfo
echo "\$ sbatch --wait -N$WORKERS --wrap 'srun hostname'"
job=$(sbatch --parsable --wait -N"$WORKERS" -o /dev/null --wrap 'srun hostname') || exit 1
echo "job $job finished:"
scontrol show job "$job" | grep -E 'JobState=|^ *NodeList='
"#;

/// Exits 97 when sackd got no configuration: then slurmctld was not reachable or refused the key.
const SACKD_PRELUDE: &str = r#"mkdir -p /run/slurm
sackd --disable-reconfig --conf-server "$CONF_SERVER"
i=0
until [ -S /run/slurm/sack.socket ] && [ -f /run/slurm/conf/slurm.conf ]; do
  i=$((i + 1))
  if [ "$i" -gt 120 ]; then echo "sackd got no config from $CONF_SERVER" >&2; exit 97; fi
  sleep 0.5
done
"#;

/// Runs `script` in a one-off pod from the login image that talks to the cluster as a Slinky login
/// node does; its exit code and output.
fn run_in_cluster(
    kubectl: &dyn Fn(&[&str]) -> Result<String>,
    apply: &dyn Fn(&str) -> Result<()>,
    script: &str,
) -> Result<(i32, String)> {
    let pod = "slurm-demo-client";
    let _ = kubectl(&[
        "-n",
        NAMESPACE,
        "delete",
        "pod",
        pod,
        "--wait=true",
        "--ignore-not-found",
    ]);
    let spec = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            // srun reaches the workers by their hostnames.
            "dnsConfig": {"searches": [format!("slurm-workers-{CONTROLLER}.{NAMESPACE}.svc.cluster.local")]},
            "containers": [{
                "name": "client",
                "image": CLIENT_IMAGE,
                "command": ["sh", "-c", format!("{SACKD_PRELUDE}{script}")],
                "env": [
                    {"name": "CONF_SERVER", "value": format!("{CONTROLLER}-controller.{NAMESPACE}:6817")},
                    {"name": "WORKERS", "value": WORKERS},
                ],
                "volumeMounts": [{"name": "slurm-etc", "mountPath": "/etc/slurm"}],
            }],
            "volumes": [{
                "name": "slurm-etc",
                "projected": {
                    "defaultMode": 0o600,
                    "sources": [{"secret": {
                        "name": "slurm-auth-slurm",
                        "items": [{"key": "slurm.key", "path": "slurm.key"}],
                    }}],
                },
            }],
        },
    });
    apply(&spec.to_string())?;
    let what = format!("pod/{pod}");
    let get = |jsonpath: &str| {
        kubectl(&[
            "-n",
            NAMESPACE,
            "get",
            &what,
            "-o",
            &format!("jsonpath={jsonpath}"),
        ])
        .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let phase = get("{.status.phase}");
        if phase == "Succeeded" || phase == "Failed" {
            break;
        }
        if Instant::now() > deadline {
            bail!("{NAMESPACE}/{pod} still {phase:?} after 300 s");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let code = get("{.status.containerStatuses[0].state.terminated.exitCode}");
    let uid = get("{.metadata.uid}");
    let path = format!("{POD_LOGS}/{NAMESPACE}_{pod}_{uid}/client/0.log");
    // CRI lines: time, stream, tag, message.
    let output: String = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the client pod's log {path}"))?
        .lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3))
        .map(|l| format!("{l}\n"))
        .collect();
    let _ = kubectl(&["-n", NAMESPACE, "delete", &what, "--wait=false"]);
    Ok((code.parse().unwrap_or(-1), output))
}

/// `slurm-operator run --namespaces slurm-demo` inside the ground's network namespace, in its own
/// process group, its output appended to [`log_file`], its pid in [`pid_file`].
fn start_operator() -> Result<Child> {
    if !Path::new(netns::NETNS_PATH).exists() {
        bail!(
            "{} is missing: the test ground is not (fully) up",
            netns::NETNS_PATH
        );
    }
    let dir = demo_dir();
    let kubeconfig = dir.join("kubeconfig-inside");
    let ground_config = std::fs::read_to_string(kube_state::kubeconfig())
        .with_context(|| format!("reading {}", kube_state::kubeconfig().display()))?;
    let inside =
        netns::inside_server(&ground_config).context("the ground's kubeconfig names no server")?;
    netns::write_private(&kubeconfig, &inside)?;
    let resolv = dir.join("resolv.conf-inside");
    netns::write_private(&resolv, netns::RESOLV_CONF)?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file())
        .with_context(|| format!("opening {}", log_file().display()))?;
    let child = netns::command(
        &resolv,
        &kubeconfig,
        binary().as_os_str(),
        [
            "run",
            "--namespaces",
            NAMESPACE,
            "--metrics-addr",
            METRICS_ADDR,
            "--health-addr",
            HEALTH_ADDR,
            "--webhook-addr",
            "0",
        ],
    )
    .env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
    )
    .stdin(Stdio::null())
    .stdout(log.try_clone()?)
    .stderr(log)
    .process_group(0)
    .spawn()
    .context("running ip netns exec (iproute2)")?;
    std::fs::write(pid_file(), format!("{}\n", child.id()))?;
    Ok(child)
}

/// The demo's operator, when the pid file names a live process running [`binary`].
fn running_operator() -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // `ip netns exec` runs `sh`, which execs the operator: any of the three, shortly after start.
    let ours = process::is_running(pid)
        && process::cmdline(pid).first().is_some_and(|argv0| {
            Path::new(argv0) == binary() || argv0 == OsStr::new("ip") || argv0 == OsStr::new("sh")
        });
    ours.then_some(pid)
}

/// Returns on SIGINT or SIGTERM; fails when the operator exits by itself.
fn wait_for_interrupt(operator: &mut Child) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    // Blocked here (threads started after inherit the mask) and taken by a thread with sigwait:
    // no handler, no unsafe. Processes started later inherit the mask too; kubectl does not mind.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block()?;
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(move || {
        if signals.wait().is_ok() {
            INTERRUPTED.store(true, Ordering::SeqCst);
        }
    });
    while !INTERRUPTED.load(Ordering::SeqCst) {
        if let Some(status) = operator.try_wait()? {
            bail!(
                "the operator exited ({status}); its log: {}",
                log_file().display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Stops the demo's operator (its whole process group) and deletes the namespace.
fn down() -> Result<()> {
    match running_operator() {
        Some(pid) => {
            let group = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while process::is_running(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            eprintln!("operator (pid {pid}) stopped");
        }
        None => eprintln!("the demo's operator is not running"),
    }
    let _ = std::fs::remove_file(pid_file());
    if let Some(state) = ground::running()? {
        let out = ground::kubectl(&state)
            .args([
                "delete",
                "namespace",
                NAMESPACE,
                "--ignore-not-found",
                "--wait=false",
            ])
            .output()?;
        if !out.status.success() {
            bail!(
                "deleting namespace {NAMESPACE}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        eprintln!(
            "namespace {NAMESPACE} deleted (its pods stop in the background); the CRDs and the test ground stay"
        );
    }
    Ok(())
}

/// The port of a listen address.
fn port(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(_, p)| p)
}

/// 1024 random alphanumeric characters, as the chart's `randAlphaNum 1024`.
fn random_key() -> Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut raw = [0u8; 1024];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut raw)?;
    Ok(raw
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect())
}
