//! Root filesystems with Slurm from Debian, built once with mmdebstrap and cached on the machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::Release;
use super::sh::run;

const PACKAGES: &[&str] = &[
    "slurmctld",
    "slurmd",
    "slurmrestd",
    "slurm-client",
    "slurm-wlm-jwt-plugin",
    "slurmdbd",
    "slurm-wlm-mysql-plugin",
    "mariadb-server",
    "procps",
];

/// Bump when the commands below change what a root contains.
const RECIPE: &str = "1";

/// Written last, so a root interrupted halfway is never taken for a finished one.
const READY: &str = ".slurm-dev-ready";

/// Users created in every root: slurmrestd refuses to run as root or SlurmUser, and tests need a normal user.
pub const REST_USER: &str = "slurmrestd";
pub const TEST_USER: &str = "alice";

pub fn cache_dir() -> PathBuf {
    std::env::var_os("SLURM_DEV_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/slurm-dev"))
}

/// Where the root of `release` lives; it changes whenever the recipe does.
pub fn root_path(release: Release) -> PathBuf {
    let recipe = format!("{}|{}|{}", release.suite(), PACKAGES.join(","), RECIPE);
    cache_dir().join("roots").join(format!(
        "{}-{:016x}",
        release.suite(),
        fnv1a(recipe.as_bytes())
    ))
}

/// Returns the root of `release`, building it first when it is not cached yet.
pub fn ensure(release: Release) -> Result<PathBuf> {
    let root = root_path(release);
    if root.join(READY).exists() {
        return Ok(root);
    }
    ensure_mmdebstrap()?;
    let parent = root.parent().expect("root has a parent");
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = root.with_extension("building");
    let log = root.with_extension("log");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("removing stale {}", tmp.display()))?;
    }
    eprintln!(
        "building the Slurm {release} root ({} from Debian) in {} (about a minute, once; log: {})",
        release.suite(),
        root.display(),
        log.display()
    );
    let started = std::time::Instant::now();
    let status = mmdebstrap(release.suite(), PACKAGES, &tmp, &log)?;
    if !status.success() {
        bail!(
            "building the Slurm {release} root failed ({status}); see {}",
            log.display()
        );
    }
    prepare(&tmp).with_context(|| format!("preparing the root in {}", tmp.display()))?;
    std::fs::write(tmp.join(READY), RECIPE)?;
    if root.exists() {
        std::fs::remove_dir_all(&root)
            .with_context(|| format!("removing unfinished {}", root.display()))?;
    }
    std::fs::rename(&tmp, &root)?;
    eprintln!(
        "built the Slurm {release} root in {:.0?}",
        started.elapsed()
    );
    Ok(root)
}

fn prepare(root: &Path) -> Result<()> {
    let root_s = root.to_str().context("root path is not UTF-8")?;
    run(Command::new("chroot").args([
        root_s,
        "useradd",
        "--system",
        "--no-create-home",
        REST_USER,
    ]))?;
    run(Command::new("chroot").args([
        root_s,
        "useradd",
        "--create-home",
        "--uid",
        "1000",
        TEST_USER,
    ]))?;
    // Daemons started by the Debian packages' maintainer scripts must never run here; the roots are only data.
    for dir in [
        "var/spool/slurmctld",
        "var/spool/slurmd",
        "var/log/slurm",
        "run/slurmdbd",
    ] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    Ok(())
}

/// A minimal Debian `suite` root with `packages` in `dir` (mmdebstrap from `SLURM_DEV_MIRROR`, else
/// Debian's default mirror), its output in `log`.
pub fn mmdebstrap(
    suite: &str,
    packages: &[&str],
    dir: &Path,
    log: &Path,
) -> Result<std::process::ExitStatus> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new("mmdebstrap");
    cmd.arg("--variant=minbase")
        .arg(format!("--include={}", packages.join(",")))
        .arg("--aptopt=Acquire::Check-Valid-Until \"false\"")
        .arg(suite)
        .arg(dir);
    if let Some(mirror) = std::env::var_os("SLURM_DEV_MIRROR") {
        cmd.arg(mirror);
    }
    cmd.stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .status()
        .context("running mmdebstrap")
}

pub fn ensure_mmdebstrap() -> Result<()> {
    ensure_program("mmdebstrap", "mmdebstrap")
}

/// Installs Debian's `package` with apt-get when `program` is not on the PATH (the only change
/// made to the host).
pub fn ensure_program(program: &str, package: &str) -> Result<()> {
    if which(program) {
        return Ok(());
    }
    eprintln!(
        "{program} is missing: installing {package} with apt-get (host package, nothing else changes)"
    );
    let installed = Command::new("apt-get")
        .args(["install", "-y", "-qq", package])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !installed || !which(program) {
        bail!(
            "{program} is not installed and `apt-get install {package}` failed: install it (Debian package \
             {package}), run `apt-get update` first if apt cannot find it"
        );
    }
    Ok(())
}

pub fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}
