//! The committed CRDs in `slurm-operator/crds/`, written by the operator binary itself
//! (`slurm-operator crds --out-dir`), so xtask does not compile kube and k8s-openapi.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

const COMMITTED: &str = "slurm-operator/crds";

/// Regenerates the CRDs into a scratch directory and returns the committed files that differ
/// (or are missing, or no longer generated), relative to `root`; without `check` it also
/// brings the committed directory up to date.
pub fn run(root: &Path, check: bool) -> Result<Vec<String>> {
    let scratch = root.join("target/xtask-generate-crds");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("clearing {}", scratch.display()))?;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(root)
        .args([
            "run",
            "-q",
            "-p",
            "slurm-operator",
            "--bin",
            "slurm-operator",
            "--",
        ])
        .arg("crds")
        .arg("--out-dir")
        .arg(&scratch)
        .output()
        .context("running `cargo run -p slurm-operator -- crds`")?;
    if !output.status.success() {
        bail!(
            "`cargo run -p slurm-operator -- crds --out-dir …` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let committed = root.join(COMMITTED);
    let mut stale = Vec::new();
    let mut generated = Vec::new();
    for entry in std::fs::read_dir(&scratch)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let fresh = std::fs::read_to_string(scratch.join(&name))?;
        let target = committed.join(&name);
        if std::fs::read_to_string(&target).ok().as_deref() != Some(fresh.as_str()) {
            stale.push(format!("{COMMITTED}/{name}"));
            if !check {
                std::fs::create_dir_all(&committed)?;
                std::fs::write(&target, fresh)
                    .with_context(|| format!("writing {}", target.display()))?;
                println!("wrote {COMMITTED}/{name}");
            }
        }
        generated.push(name);
    }
    if let Ok(entries) = std::fs::read_dir(&committed) {
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && !generated.contains(&name) {
                stale.push(format!("{COMMITTED}/{name} (no longer generated)"));
                if !check {
                    std::fs::remove_file(committed.join(&name))?;
                    println!("removed {COMMITTED}/{name}");
                }
            }
        }
    }
    stale.sort();
    Ok(if check { stale } else { Vec::new() })
}
