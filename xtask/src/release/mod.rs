//! `cargo xtask release VERSION`: one version for the whole project (the crates, the images and
//! the charts), cut in one command. The steps, in order, each stopping the release if it fails:
//!
//! 1. the work tree is clean and VERSION is above the last release;
//! 2. `[workspace.package] version`, every chart's `version` (and `appVersion` where it is the
//!    project's) and Cargo.lock are set to VERSION; each published crate's CHANGELOG.md has its
//!    Unreleased section moved under `## [VERSION] - today`;
//! 3. `cargo semver-checks` against the last release (breaking changes need a minor bump in 0.x);
//! 4. `cargo publish --dry-run` of each published crate (packaged and built as crates.io would);
//! 5. a commit `release: vVERSION` and an annotated tag `vVERSION`;
//! 6. the packaged charts into `target/release/vVERSION/`, and unless `--no-images` the release
//!    images (`cargo xtask image project`, named with VERSION; about 14 minutes cold on 2 cores).
//!
//! Nothing is pushed or published: the printed next steps say what to push where.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

pub mod semver;
mod version;

use version::Version;

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The version to release, `MAJOR.MINOR.PATCH` (a leading `v` is accepted).
    version: String,
    /// Package the charts but build no images.
    #[arg(long)]
    no_images: bool,
}

pub fn run(workspace: &Path, args: &ReleaseArgs) -> Result<()> {
    let to: Version = args.version.parse()?;
    let manifest_path = workspace.join("Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path)?;
    let from = version::workspace_version(&manifest)?;
    let last = semver::last_release(workspace)?;
    check_order(from, to, last.is_some())?;
    if !semver::git(workspace, &["status", "--porcelain"])?.is_empty() {
        bail!("the work tree has uncommitted changes: commit or stash them before a release");
    }

    step("set the version", || {
        std::fs::write(
            &manifest_path,
            version::set_workspace_version(&manifest, to)?,
        )?;
        for chart in crate::helm::charts(workspace)? {
            let file = chart.join("Chart.yaml");
            let text = std::fs::read_to_string(&file)?;
            std::fs::write(&file, version::set_chart_version(&text, from, to))?;
        }
        let date = semver::git(workspace, &["log", "-1", "--format=%cs", "HEAD"]).ok();
        let today = today().or(date).context("no date for the changelog")?;
        for krate in semver::PUBLISHED {
            let file = workspace.join(krate).join("CHANGELOG.md");
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            std::fs::write(&file, version::release_changelog(&text, to, &today)?)
                .with_context(|| format!("writing {}", file.display()))?;
        }
        run_cmd(cargo(workspace).args(["update", "--workspace", "--offline"]))
    })?;
    if let Some(last) = &last {
        step("semver checks against the last release", || {
            semver::check(workspace, Some(last), false)
        })?;
    }
    step("cargo publish --dry-run", || {
        for krate in semver::PUBLISHED {
            run_cmd(cargo(workspace).args(["publish", "--dry-run", "--allow-dirty", "-p", krate]))?;
        }
        Ok(())
    })?;
    let tag = to.tag();
    step("commit and tag", || {
        run_cmd(
            git(workspace)
                .args(["commit", "--all", "--quiet", "--message"])
                .arg(format!("release: {tag}")),
        )?;
        run_cmd(git(workspace).args(["tag", "--annotate", &tag, "--message", &tag]))
    })?;
    let out = release_dir(workspace, to);
    step("chart packages", || charts(workspace, &out))?;
    if !args.no_images {
        step("release images", || {
            run_cmd(xtask(workspace)?.args(["image", "project"]))
        })?;
    }
    println!("\nreleased {tag}. Next, by hand:");
    println!("  git push origin main {tag}");
    for krate in semver::PUBLISHED {
        println!("  cargo publish -p {krate}");
    }
    if !args.no_images {
        println!(
            "  the images in target/images/*.oci.tar to your registry (README: Deploy on Kubernetes)"
        );
    }
    println!(
        "  the chart packages in {} to your chart repository",
        out.display()
    );
    Ok(())
}

/// A release moves forward; the first one may release the version the manifest already has.
fn check_order(from: Version, to: Version, released_before: bool) -> Result<()> {
    if to > from || (to == from && !released_before) {
        return Ok(());
    }
    bail!(
        "cannot release {to}: the project is at {from} already (a release must raise the version)"
    )
}

fn charts(workspace: &Path, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)?;
    for chart in crate::helm::charts(workspace)? {
        run_cmd(
            xtask(workspace)?
                .args(["helm", "package", "--destination"])
                .arg(out)
                .arg(&chart),
        )?;
    }
    Ok(())
}

/// This xtask binary again, for its other subcommands.
fn xtask(workspace: &Path) -> Result<Command> {
    let mut cmd = Command::new(std::env::current_exe().context("the xtask binary")?);
    cmd.current_dir(workspace);
    Ok(cmd)
}

fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    eprintln!("==> {name}");
    f().with_context(|| format!("release step `{name}` failed"))
}

/// Today in UTC, `YYYY-MM-DD`, from `date` (what the changelog's heading carries).
fn today() -> Option<String> {
    let out = Command::new("date").args(["-u", "+%F"]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn cargo(workspace: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace);
    cmd
}

fn git(workspace: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(workspace);
    cmd
}

fn run_cmd(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// Where `cargo xtask release` leaves the chart packages of `version`.
fn release_dir(workspace: &Path, version: Version) -> PathBuf {
    crate::target_dir(workspace)
        .join("release")
        .join(version.tag())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_raises_the_version_except_the_first() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert!(check_order(v("0.1.0"), v("0.2.0"), true).is_ok());
        assert!(check_order(v("0.1.0"), v("0.1.0"), false).is_ok());
        assert!(check_order(v("0.1.0"), v("0.1.0"), true).is_err());
        assert!(check_order(v("0.2.0"), v("0.1.9"), false).is_err());
    }
}
