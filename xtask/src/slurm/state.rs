//! What `up` recorded about a running cluster, so that `down`, `status` and `exec` find it again.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::Release;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub release: Release,
    pub root: PathBuf,
    pub netns: String,
    pub port: u16,
    pub nodes: u32,
    /// Nodes in slurm.conf without a slurmd (`--virtual-nodes`).
    #[serde(default)]
    pub virtual_nodes: u32,
    pub accounting: bool,
    /// Daemons in start order, by name; the REST proxy runs on the host.
    pub daemons: Vec<Daemon>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Daemon {
    pub name: String,
    pub pid: u32,
}

pub fn run_dir(release: Release) -> PathBuf {
    std::env::var_os("SLURM_DEV_RUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/slurm-dev"))
        .join(release.name())
}

pub fn env_file(release: Release) -> PathBuf {
    run_dir(release).join("cluster.env")
}

fn state_file(release: Release) -> PathBuf {
    run_dir(release).join("state.json")
}

impl State {
    pub fn load(release: Release) -> Result<Option<State>> {
        let path = state_file(release);
        match std::fs::read(&path) {
            Ok(raw) => serde_json::from_slice(&raw)
                .map(Some)
                .with_context(|| format!("{} is not a cluster state file", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Written after every daemon that starts, so a crash halfway leaves a usable record.
    pub fn save(&self, release: Release) -> Result<()> {
        let dir = run_dir(release);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join("state.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, state_file(release))?;
        Ok(())
    }

    pub fn log_dir(&self) -> PathBuf {
        log_dir(&self.root)
    }

    pub fn socket(&self) -> PathBuf {
        rest_socket(&self.root)
    }
}

pub fn log_dir(root: &Path) -> PathBuf {
    root.join("var/log/slurm")
}

pub fn rest_socket(root: &Path) -> PathBuf {
    root.join("run/slurmrestd/slurmrestd.socket")
}
