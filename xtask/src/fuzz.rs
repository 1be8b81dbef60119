//! `cargo xtask fuzz [TARGET] [--seconds N]`: the fuzz targets of `xtask/fuzz` (cargo-fuzz,
//! libFuzzer) run one after another, N seconds each. cargo-fuzz is installed from crates.io on
//! first use; libFuzzer needs a nightly toolchain, which this says how to get when there is none.
//!
//! The committed seeds (`xtask/fuzz/corpus/<target>/`) are read, never written: libFuzzer
//! writes what it finds to a working corpus under `target/fuzz/corpus/<target>/` (kept between
//! runs), so the repository keeps only the small seed corpus. A crash is left in
//! `xtask/fuzz/artifacts/<target>/` (gitignored) and fails the command: minimize it
//! (`cargo +nightly fuzz tmin --fuzz-dir xtask/fuzz TARGET FILE`), add it to the target's
//! corpus as `regress-<what>` (the stable tests replay it) and fix the parser.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The cargo-fuzz the command installs.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// The targets, in the order a full run takes them (the same names as `fuzz_targets::TARGETS`
/// and `xtask/fuzz/Cargo.toml`'s binaries).
pub const TARGETS: &[&str] = &[
    "hostlist",
    "jobs_decode",
    "nodes_decode",
    "stream_split",
    "operator_review",
    "bridge_review",
    "bridge_annotations",
    "sbatch",
    "extra_conf",
    "node_annotations",
];

pub fn run(workspace: &Path, target: Option<&str>, seconds: u64) -> Result<()> {
    let targets: Vec<&str> = match target {
        Some(t) if TARGETS.contains(&t) => vec![t],
        Some(t) => bail!("no fuzz target {t:?}; the targets: {}", TARGETS.join(", ")),
        None => TARGETS.to_vec(),
    };
    ensure_nightly()?;
    ensure_cargo_fuzz()?;
    let fuzz_dir = workspace.join("xtask/fuzz");
    // The fuzz crate is a workspace of its own: start it from the main lock, so that it builds
    // the same dependency versions the tests do.
    let lock = fuzz_dir.join("Cargo.lock");
    if !lock.exists() {
        std::fs::copy(workspace.join("Cargo.lock"), &lock).context("copying Cargo.lock")?;
    }
    let target_dir = crate::target_dir(workspace).join("fuzz");
    let mut failed = Vec::new();
    for target in targets {
        let work = target_dir.join("corpus").join(target);
        std::fs::create_dir_all(&work).with_context(|| work.display().to_string())?;
        let artifacts = fuzz_dir.join("artifacts").join(target);
        std::fs::create_dir_all(&artifacts).with_context(|| artifacts.display().to_string())?;
        eprintln!("fuzz {target}: {seconds} s");
        let status = rustup_cargo()
            .current_dir(workspace)
            .args(["+nightly", "fuzz", "run", "--fuzz-dir"])
            .arg(&fuzz_dir)
            .arg("--target-dir")
            .arg(&target_dir)
            // Safe Rust: AddressSanitizer finds little here and doubles a build of the whole
            // operator and bridge on two cores; debug assertions (overflow checks) stay on.
            .args(["--sanitizer", "none", target])
            .arg(&work)
            .arg(fuzz_dir.join("corpus").join(target))
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            // A single input that takes seconds is a hang worth reporting.
            .arg("-timeout=10")
            .arg("-rss_limit_mb=2048")
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .arg("-print_final_stats=1")
            .status()
            .context("running cargo +nightly fuzz")?;
        if !status.success() {
            eprintln!(
                "fuzz {target}: failed ({status}); the input is in {}",
                artifacts.display()
            );
            failed.push(target);
        }
    }
    if !failed.is_empty() {
        bail!("fuzzing found crashes in: {}", failed.join(", "));
    }
    Ok(())
}

/// `cargo` through rustup (which understands `+nightly`), without the toolchain this xtask
/// was started with pinning the child to stable.
fn rustup_cargo() -> Command {
    let mut cmd = Command::new("cargo");
    for var in [
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn ensure_nightly() -> Result<()> {
    let ok = rustup_cargo()
        .args(["+nightly", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        bail!(
            "cargo xtask fuzz needs a nightly Rust toolchain (libFuzzer's instrumentation is \
             nightly-only), and `cargo +nightly` does not run here. With rustup: `rustup \
             toolchain install nightly --profile minimal`, then run this again. Without one, the \
             committed corpora are still replayed on stable by `cargo test -p fuzz-targets` \
             (and by `cargo xtask test`)."
        );
    }
    Ok(())
}

/// Installs cargo-fuzz `CARGO_FUZZ_VERSION` (with the stable toolchain) unless it is there.
fn ensure_cargo_fuzz() -> Result<()> {
    let installed = rustup_cargo()
        .args(["fuzz", "--version"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_FUZZ_VERSION))
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    eprintln!("installing cargo-fuzz {CARGO_FUZZ_VERSION} from crates.io (once per machine)");
    let status = rustup_cargo()
        .args(["install", "--locked", "cargo-fuzz", "--version"])
        .arg(format!("={CARGO_FUZZ_VERSION}"))
        .status()
        .context("running cargo install")?;
    if !status.success() {
        bail!("cargo install cargo-fuzz {CARGO_FUZZ_VERSION} failed (above)");
    }
    Ok(())
}
