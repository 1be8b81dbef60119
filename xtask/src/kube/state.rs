//! What `kube up` recorded, so that `down`, `status` and `kubectl` find the ground again.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::slurm::Release;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    /// `--nodes`: how many nodes the test kubelet registers.
    pub nodes: u32,
    /// `--slurm`: the Slurm cluster whose nodes the Kubernetes nodes will stand for.
    pub slurm: Option<Release>,
    /// `--hollow-nodes` and their options: the nodes the hollow process serves.
    #[serde(default)]
    pub hollow: Option<Hollow>,
    pub kubectl: PathBuf,
    /// Processes in start order; `down` stops them in reverse.
    pub daemons: Vec<Daemon>,
}

/// Hollow nodes: Node objects whose pods run without containers (`kube-ground hollow`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hollow {
    pub nodes: u32,
    /// `cpu=4,memory=8Gi,pods=110`: what each offers; empty, as the test kubelet's nodes.
    pub allocatable: String,
    /// Tainted `kube-ground.slurm-rs.dev/hollow=true:NoSchedule`.
    pub taint: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Daemon {
    pub name: String,
    pub pid: u32,
    /// The program it runs: a PID whose command line names another program is not ours anymore.
    pub program: PathBuf,
}

/// `/run/slurm-dev/kube` (or under `SLURM_DEV_RUN`): state, kubeconfig, env file, logs, etcd's data.
pub fn run_dir() -> PathBuf {
    std::env::var_os("SLURM_DEV_RUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/slurm-dev"))
        .join("kube")
}

pub fn kubeconfig() -> PathBuf {
    run_dir().join("kubeconfig")
}

pub fn env_file() -> PathBuf {
    run_dir().join("kube.env")
}

/// netd's dial socket: where the API server has connections to the ground's Services made
/// (webhooks given as a Service reference); root only.
pub fn netd_dial_socket() -> PathBuf {
    run_dir().join("netd-dial.sock")
}

pub fn log_dir() -> PathBuf {
    run_dir().join("logs")
}

pub fn audit_log() -> PathBuf {
    log_dir().join("audit.log")
}

/// The API server's CA, certificates and static token file; kept across `down` and `up`.
pub fn pki_dir() -> PathBuf {
    run_dir().join("pki")
}

/// etcd's data: a fresh, empty store at every `up`.
pub fn etcd_dir() -> PathBuf {
    run_dir().join("etcd")
}

fn state_file() -> PathBuf {
    run_dir().join("state.json")
}

impl State {
    pub fn load() -> Result<Option<State>> {
        let path = state_file();
        match std::fs::read(&path) {
            Ok(raw) => serde_json::from_slice(&raw)
                .map(Some)
                .with_context(|| format!("{} is not a test ground state file", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Written after every process that starts, so a crash halfway leaves a usable record.
    pub fn save(&self) -> Result<()> {
        let dir = run_dir();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join("state.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, state_file())?;
        Ok(())
    }

    pub fn remove() -> Result<()> {
        match std::fs::remove_file(state_file()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}
