//! The project binaries for the images: one `cargo build` of all of them, static (glibc's crt-static;
//! the project speaks TLS through rustls, so nothing needs OpenSSL), in the `image` profile of the
//! workspace's Cargo.toml (its comment has the figures it was chosen by). Then each binary is checked: no
//! ELF interpreter (so nothing to load from a base image) and `--help` runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::project::Project;

/// Explicit, so that RUSTFLAGS reach only the binaries, not build scripts and proc macros (which run
/// on the host and must stay dynamic), and so the artifacts live apart from the tests' ones.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";
pub const PROFILE: &str = "image";
const RUSTFLAGS: &str = "-C target-feature=+crt-static";

/// Builds the binaries of `selected` and returns their paths, in the same order. Every project image's
/// package and features are always named, so cargo resolves the same features whichever images are
/// selected, and building one image reuses what building all of them compiled.
pub fn build(
    workspace: &Path,
    all: &[Project],
    selected: &[&Project],
    dev: bool,
) -> Result<Vec<PathBuf>> {
    if dev {
        return build_dev(workspace, all, selected);
    }
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace)
        .args(["build", "--profile", PROFILE, "--target", TARGET])
        // CARGO_ENCODED_RUSTFLAGS would win over RUSTFLAGS.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", RUSTFLAGS);
    let mut packages: Vec<&str> = all.iter().map(|p| p.package).collect();
    packages.sort_unstable();
    packages.dedup();
    for package in packages {
        cmd.args(["--package", package]);
    }
    let features: Vec<&str> = all
        .iter()
        .flat_map(|p| p.features.iter().copied())
        .collect();
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    for image in selected {
        cmd.args(["--bin", image.name]);
    }
    let started = Instant::now();
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("building the project binaries failed ({status}): {cmd:?}");
    }
    let dir = crate::target_dir(workspace).join(TARGET).join(PROFILE);
    let binaries: Vec<PathBuf> = selected.iter().map(|p| dir.join(p.name)).collect();
    for binary in &binaries {
        check(binary)?;
    }
    eprintln!(
        "  {} static binar{} ready in {:.1} s",
        binaries.len(),
        if binaries.len() == 1 { "y" } else { "ies" },
        started.elapsed().as_secs_f64()
    );
    Ok(binaries)
}

/// `--dev`: each binary from the dev profile, linked statically at the end. Only the binary's own crate
/// gets the static flag, so every dependency is the one the tests already compiled and a build takes a
/// link, not a release build. Images for the test ground, not for shipping: opt-level 0, no symbols.
fn build_dev(workspace: &Path, all: &[Project], selected: &[&Project]) -> Result<Vec<PathBuf>> {
    let started = Instant::now();
    let features: Vec<&str> = all
        .iter()
        .flat_map(|p| p.features.iter().copied())
        .collect();
    let out = crate::target_dir(workspace).join("image-dev");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut binaries = Vec::new();
    for image in selected {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(workspace)
            .args(["rustc", "--package", image.package, "--bin", image.name]);
        // Every image's features in every call, as in the release build: the dependencies (the
        // big one is slurm-client's generated code) are then compiled once for all four, not once
        // per feature set.
        if !features.is_empty() {
            cmd.arg("--features").arg(features.join(","));
        }
        cmd.args([
            "--",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "strip=symbols",
        ]);
        let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
        if !status.success() {
            bail!("building {} failed ({status}): {cmd:?}", image.name);
        }
        // Copied out: the next `cargo test` links its own binary over target/debug's.
        let built = crate::target_dir(workspace).join("debug").join(image.name);
        let binary = out.join(image.name);
        std::fs::copy(&built, &binary)
            .with_context(|| format!("copying {} to {}", built.display(), binary.display()))?;
        check(&binary)?;
        binaries.push(binary);
    }
    eprintln!(
        "  {} static dev binar{} ready in {:.1} s",
        binaries.len(),
        if binaries.len() == 1 { "y" } else { "ies" },
        started.elapsed().as_secs_f64()
    );
    Ok(binaries)
}

/// Fails unless `binary` is a static executable that answers `--help`.
fn check(binary: &Path) -> Result<()> {
    let bytes = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    if let Some(interpreter) = interpreter(&bytes)? {
        bail!(
            "{} is dynamically linked (interpreter {interpreter}): it would not start in an image \
             without libc; is RUSTFLAGS={RUSTFLAGS:?} overridden?",
            binary.display()
        );
    }
    let status = Command::new(binary)
        .arg("--help")
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("starting {}", binary.display()))?;
    if !status.success() {
        bail!("{} --help failed ({status})", binary.display());
    }
    Ok(())
}

/// The ELF interpreter (`PT_INTERP`) of a 64-bit little-endian executable: `None` for a static one.
fn interpreter(elf: &[u8]) -> Result<Option<String>> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let u64_at = |at: usize| -> Result<usize> {
        let bytes = elf.get(at..at + 8).context("truncated ELF file")?;
        Ok(u64::from_le_bytes(bytes.try_into()?) as usize)
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let header = phoff + i * phentsize;
        let kind = elf.get(header..header + 4).context("truncated ELF file")?;
        const PT_INTERP: u32 = 3;
        if u32::from_le_bytes(kind.try_into()?) == PT_INTERP {
            let (offset, size) = (u64_at(header + 8)?, u64_at(header + 32)?);
            let path = elf
                .get(offset..offset + size)
                .context("truncated ELF file")?;
            let path = String::from_utf8_lossy(path);
            return Ok(Some(path.trim_end_matches('\0').to_owned()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_interpreter_of_a_dynamic_executable() {
        // This test binary is linked dynamically, as cargo builds it by default.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let found = interpreter(&me).unwrap().expect("a dynamic executable");
        assert!(found.starts_with("/lib"), "{found}");
        assert!(interpreter(b"#!/bin/sh\n").is_err());
    }
}
