//! `cargo xtask semver`: the public API of each published crate compared with the last release by
//! cargo-semver-checks (from crates.io, installed here on first use). A breaking change fails unless
//! the version in Cargo.toml announces it (0.1 → 0.2 while the project is 0.x).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The crates meant for crates.io. The operator, the bridge, the exporter and kube-support ship as
/// images and charts (`publish = false`): their API is not anyone's dependency.
pub const PUBLISHED: &[&str] = &["slurm-client"];

/// The cargo-semver-checks release CI installs. Each release reads the rustdoc JSON of a range
/// of Rust releases: move it forward with the toolchain.
const TOOL_VERSION: &str = "0.51.0";

/// The commit of the last release: its tag `vX.Y.Z` when the clone has tags, else the newest
/// commit whose subject is `release: vX.Y.Z` (what `cargo xtask release` commits), which a clone
/// without tags still has.
pub fn last_release(workspace: &Path) -> Result<Option<String>> {
    let tag = git(
        workspace,
        &["describe", "--tags", "--abbrev=0", "--match", "v[0-9]*"],
    );
    if let Ok(tag) = tag {
        return Ok(Some(tag));
    }
    let commit = git(
        workspace,
        &[
            "log",
            "-1",
            "--format=%H",
            "--extended-regexp",
            "--grep=^release: v[0-9]+\\.[0-9]+\\.[0-9]+$",
        ],
    )?;
    Ok((!commit.is_empty()).then_some(commit))
}

/// Compares each published crate with `baseline` (a git revision), or with the last release.
pub fn check(workspace: &Path, baseline: Option<&str>) -> Result<()> {
    let baseline = match baseline {
        Some(rev) => rev.to_owned(),
        None => last_release(workspace)?.context(
            "no release to compare the API with: no tag v* and no `release: v…` commit in this \
             clone's history (a shallow clone? fetch the history, or pass --baseline REV)",
        )?,
    };
    ensure_tool()?;
    for krate in PUBLISHED {
        eprintln!("cargo semver-checks: {krate} against {baseline}");
        // Every feature: the generated module of each REST version is public API too.
        let status = cargo(workspace)
            .args(["semver-checks", "--package", krate])
            .args(["--baseline-rev", &baseline, "--all-features"])
            .status()
            .context("running cargo semver-checks")?;
        if !status.success() {
            bail!(
                "{krate}'s public API breaks semver against {baseline} (above): undo the change, or \
                 announce it by raising the version in Cargo.toml's [workspace.package] (a breaking \
                 change while 0.x: 0.1.0 → 0.2.0) and write it in {krate}/CHANGELOG.md"
            );
        }
    }
    Ok(())
}

/// Installs cargo-semver-checks `TOOL_VERSION` unless that version is on the PATH already.
fn ensure_tool() -> Result<()> {
    let installed = Command::new(cargo_program())
        .args(["semver-checks", "--version"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(TOOL_VERSION))
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    eprintln!("installing cargo-semver-checks {TOOL_VERSION} from crates.io (once per machine)");
    let status = Command::new(cargo_program())
        .args(["install", "--locked", "cargo-semver-checks", "--version"])
        .arg(format!("={TOOL_VERSION}"))
        .status()
        .context("running cargo install")?;
    if !status.success() {
        bail!("cargo install cargo-semver-checks {TOOL_VERSION} failed (above)");
    }
    Ok(())
}

fn cargo_program() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn cargo(workspace: &Path) -> Command {
    let mut cmd = Command::new(cargo_program());
    cmd.current_dir(workspace);
    cmd
}

/// `git <args>` in the workspace; its trimmed stdout.
pub fn git(workspace: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .current_dir(workspace)
        .args(args)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
