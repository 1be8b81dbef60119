//! The ground's own processes (the `kube-ground` binary, test-only): the pod network, netd (cluster
//! DNS and Service routing), the stand-in controllers and scheduler, and the test kubelet, which
//! runs pods from the images `cargo xtask image` builds (Slurm 26.05 and the toolbox by default);
//! with `--hollow-nodes`, the hollow process (Node objects whose pods run without containers);
//! and the nodes' kubelet API (logs, exec, attach, port-forward), the API server's binary in its
//! `kubelet-api` mode.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::state::{self, State};
use crate::slurm::sh::run;

/// Images every ground has: what the tests' pods, a Slurm 26.05 cluster and its accounting database need.
const IMAGES: &[&str] = &["toolbox", "26.05", "mariadb"];
const NODES_READY: Duration = Duration::from_secs(60);

/// The binary, copied out of the target directory so that a later `cargo build` cannot replace it
/// under the running ground.
fn binary() -> PathBuf {
    state::run_dir().join("bin").join("kube-ground")
}

/// The kubelet's token for pods' service accounts (a line of the API server's token file).
fn pod_token_file() -> PathBuf {
    state::pki_dir().join("pod-token")
}

/// Hollow nodes are `hollow-1` … `hollow-N`.
pub const HOLLOW_PREFIX: &str = "hollow-";

pub fn node_names(state: &State) -> Vec<String> {
    (1..=state.nodes)
        .map(|i| match state.slurm {
            // The Slurm cluster's own node names, so that pods and Slurm jobs meet on "the same" nodes.
            Some(_) => format!("node{i}"),
            None => format!("node-{i}"),
        })
        .collect()
}

/// Builds what the parts need before anything starts: the binary and the images.
pub fn prepare(workspace: &Path) -> Result<()> {
    let started = Instant::now();
    for (program, package) in [("podman", "podman"), ("runc", "runc"), ("nft", "nftables")] {
        crate::slurm::rootfs::ensure_program(program, package)?;
    }
    // As the tests build it: after them (CI), nothing is left to compile.
    let built = crate::unified::binaries(workspace, &["kube-ground"])
        .context("building kube-ground")?
        .remove(0);
    let bin = binary();
    std::fs::create_dir_all(bin.parent().expect("has a parent"))?;
    let tmp = bin.with_extension("new");
    std::fs::copy(&built, &tmp).with_context(|| format!("copying {}", built.display()))?;
    std::fs::rename(&tmp, &bin)?;
    crate::image::ensure(workspace, IMAGES)?;
    eprintln!(
        "kube-ground and images ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The nodes' kubelet API, served by the API server's binary (`kubelet-api`) on the loopback: not
/// 10250, so that a real kubelet on the machine does not clash.
pub const KUBELET_API_ADDR: &str = "127.0.0.1:10450";

/// Starts the parts; the API server is up and the kubeconfig written. `apiserver` is its binary,
/// which also serves the kubelet API.
pub fn start(
    state: &mut State,
    apiserver: &Path,
    spawn: impl Fn(&mut State, &str, &Path, &[String]) -> Result<()>,
) -> Result<()> {
    let bin = binary();
    run(Command::new(&bin).arg("network")).context("creating the pod network")?;
    let token = pod_token()?;
    let nodes = node_names(state);
    spawn(
        state,
        "netd",
        &bin,
        &[
            "netd".into(),
            format!("--apiserver={}", super::ground::API_ADDR),
            "--netns=slurm-dev-kube".into(),
            format!("--dial-socket={}", state::netd_dial_socket().display()),
        ],
    )?;
    spawn(state, "controllers", &bin, &["controllers".into()])?;
    spawn(
        state,
        "kubelet",
        &bin,
        &[
            "kubelet".into(),
            format!("--nodes={}", nodes.join(",")),
            format!("--ca-file={}", state::pki_dir().join("ca.crt").display()),
            format!("--token-file={}", token.display()),
            format!(
                "--token-auth-file={}",
                state::pki_dir().join("tokens.csv").display()
            ),
            format!("--image-layout={}", crate::image::store_path().display()),
            "--extended-resource=nvidia.com/gpu=2".into(),
            format!(
                "--kubelet-port={}",
                KUBELET_API_ADDR.rsplit(':').next().unwrap_or_default()
            ),
        ],
    )?;
    if let Some(hollow) = state.hollow.clone() {
        let mut args = vec![
            "hollow".to_string(),
            format!("--nodes={}", hollow.nodes),
            format!("--prefix={HOLLOW_PREFIX}"),
        ];
        if !hollow.allocatable.is_empty() {
            args.push(format!("--allocatable={}", hollow.allocatable));
        }
        if hollow.taint {
            args.push("--taint".into());
        }
        spawn(state, "hollow", &bin, &args)?;
    }
    // The podman configuration and log layout of kube_ground's RuntimeConfig::ground().
    let ground = Path::new("/var/lib/slurm-dev/kube");
    spawn(
        state,
        "kubelet-api",
        apiserver,
        &[
            "kubelet-api".into(),
            format!("--address={KUBELET_API_ADDR}"),
            format!("--data-dir={}", state::pki_dir().display()),
            format!(
                "--containers-conf={}",
                ground.join("podman/containers.conf").display()
            ),
            format!(
                "--storage-conf={}",
                ground.join("podman/storage.conf").display()
            ),
            format!("--log-root={}", ground.join("logs/pods").display()),
        ],
    )?;
    let hollow = state.hollow.as_ref().map_or(0, |h| h.nodes as usize);
    wait_nodes_ready(state, nodes.len() + hollow)
}

/// Removes every container and pod sandbox and the pod network, also after a crash.
pub fn clean_up() {
    let bin = binary();
    if bin.exists() {
        let _ = Command::new(&bin).args(["cleanup", "--teardown"]).status();
    }
}

/// A token the API server accepts for pods' service accounts, added to its token file (which it
/// re-reads on change); the same one for every pod of the ground.
fn pod_token() -> Result<PathBuf> {
    let path = pod_token_file();
    if path.exists() {
        return Ok(path);
    }
    let mut raw = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .context("reading /dev/urandom")?;
    let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let tokens = state::pki_dir().join("tokens.csv");
    let mut csv = std::fs::read_to_string(&tokens).unwrap_or_default();
    if !csv.is_empty() && !csv.ends_with('\n') {
        csv.push('\n');
    }
    csv.push_str(&format!(
        "{token},system:serviceaccount:default:default,kube-ground-pods,\"system:serviceaccounts,system:authenticated\"\n"
    ));
    std::fs::write(&tokens, csv).with_context(|| format!("writing {}", tokens.display()))?;
    std::fs::write(&path, &token)?;
    for p in [&tokens, &path] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(path)
}

fn wait_nodes_ready(state: &State, want: usize) -> Result<()> {
    // Hollow nodes register a few at a time: a thousand take seconds.
    let limit = NODES_READY + Duration::from_millis(50) * want as u32;
    let deadline = Instant::now() + limit;
    loop {
        let out = super::ground::kubectl(state)
            .args([
                "get",
                "nodes",
                "-o",
                r#"jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}"#,
            ])
            .output()?;
        let ready = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|s| *s == "True")
            .count();
        if ready >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{ready} of {want} nodes Ready after {limit:?}; see {} and {}",
                state::log_dir().join("kubelet.log").display(),
                state::log_dir().join("hollow.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}
