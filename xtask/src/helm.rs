//! `cargo xtask helm …`: real Helm 4 for the project's charts. Helm has no Debian package and no
//! release binary can be fetched here, so its Go SDK comes from PyPI's helm-python-sdk (a native
//! library in the wheel) in a venv under the cache, driven by `xtask/helm/helm.py`, which takes
//! helm's own arguments (`lint`, `template`, `install`, `upgrade`, `uninstall`, `list`, `package`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::slurm::rootfs::cache_dir;

/// The wheel the venv holds: Helm v4.2.3's SDK.
const SDK: &str = "helm-python-sdk==0.2.2";

#[derive(Debug, clap::Args)]
pub struct HelmCmd {
    /// helm's arguments, e.g. `lint slurm-operator/charts/slurm-operator`; `setup` only makes the venv.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    args: Vec<String>,
}

pub fn run(workspace: &Path, cmd: HelmCmd) -> Result<()> {
    let python = ensure()?;
    if cmd.args == ["setup"] {
        println!("{}", python.display());
        return Ok(());
    }
    let status = command(workspace, &python)
        .args(&cmd.args)
        .status()
        .context("running helm.py")?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// Every chart of the workspace: `<crate>/charts/<chart>/Chart.yaml`.
pub fn charts(workspace: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for krate in std::fs::read_dir(workspace)? {
        let dir = krate?.path().join("charts");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for chart in entries {
            let chart = chart?.path();
            if chart.join("Chart.yaml").is_file() {
                out.push(chart);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `helm lint --strict` of every chart: CI's chart check.
pub fn lint_all(workspace: &Path) -> Result<()> {
    let python = ensure()?;
    let charts = charts(workspace)?;
    if charts.is_empty() {
        return Ok(());
    }
    let status = command(workspace, &python)
        .args(["lint", "--strict"])
        .args(&charts)
        .status()
        .context("running helm.py lint")?;
    if !status.success() {
        bail!("helm lint found problems in the charts (above)");
    }
    Ok(())
}

fn command(workspace: &Path, python: &Path) -> Command {
    let mut c = Command::new(python);
    c.arg(workspace.join("xtask/helm/helm.py"));
    if std::env::var_os("KUBECONFIG").is_none()
        && let Ok(env) = test_env()
    {
        c.env("KUBECONFIG", env);
    }
    c
}

/// The test ground's kubeconfig, when the ground is up.
fn test_env() -> Result<String> {
    let text = std::fs::read_to_string(crate::kube::state::env_file())?;
    text.lines()
        .find_map(|l| l.strip_prefix("KUBECONFIG="))
        .map(str::to_owned)
        .context("no KUBECONFIG in the ground's env file")
}

/// The venv's python with helm-python-sdk installed: `$SLURM_DEV_CACHE/helm/venv` (made once; pip
/// downloads the ~75 MB wheel from PyPI the first time).
pub fn ensure() -> Result<PathBuf> {
    let venv = cache_dir().join("helm/venv");
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == SDK) {
        return Ok(python);
    }
    eprintln!("making {} with {SDK}", venv.display());
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(venv.parent().expect("a parent"))?;
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("running python3 -m venv")?
        .success();
    if !ok {
        bail!("python3 -m venv {} failed", venv.display());
    }
    let ok = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            SDK,
        ])
        .status()
        .context("running pip")?
        .success();
    if !ok {
        bail!("pip install {SDK} failed (PyPI must be reachable the first time)");
    }
    std::fs::write(&stamp, SDK)?;
    Ok(python)
}
