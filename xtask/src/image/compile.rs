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

/// A binary for an image, and the shared libraries it loads (none for a static one).
pub struct Binary {
    pub path: PathBuf,
    pub libs: Vec<PathBuf>,
}

/// Builds the binaries of `selected` and returns them, in the same order. Every project image's
/// package and features are always named, so cargo resolves the same features whichever images are
/// selected, and building one image reuses what building all of them compiled.
pub fn build(
    workspace: &Path,
    all: &[Project],
    selected: &[&Project],
    dev: bool,
) -> Result<Vec<Binary>> {
    if dev {
        return build_dev(workspace, selected);
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
    let binaries: Vec<Binary> = selected
        .iter()
        .map(|p| Binary {
            path: dir.join(p.name),
            libs: Vec::new(),
        })
        .collect();
    for binary in &binaries {
        check(&binary.path)?;
    }
    eprintln!(
        "  {} static binar{} ready in {:.1} s",
        binaries.len(),
        if binaries.len() == 1 { "y" } else { "ies" },
        started.elapsed().as_secs_f64()
    );
    Ok(binaries)
}

/// `--dev`: the binaries as the tests build them (see unified.rs: after the tests, nothing is left to
/// compile), stripped, with the shared libraries they load listed for the image. Images for the test
/// ground, not for shipping: opt-level 0, dynamic glibc from the host's Debian packages.
fn build_dev(workspace: &Path, selected: &[&Project]) -> Result<Vec<Binary>> {
    let started = Instant::now();
    let names: Vec<&str> = selected.iter().map(|p| p.name).collect();
    let built = crate::unified::binaries(workspace, &names)?;
    let out = crate::target_dir(workspace).join("image-dev");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut binaries = Vec::new();
    for (name, path) in names.iter().zip(built) {
        // Copied out, stripped: the next test build links its own binary over target/debug's.
        let binary = out.join(name);
        run_ok(Command::new("strip").arg("-o").arg(&binary).arg(&path))
            .with_context(|| format!("stripping {}", path.display()))?;
        let libs = shared_libraries(&binary)?;
        answers_help(&binary)?;
        binaries.push(Binary { path: binary, libs });
    }
    eprintln!(
        "  {} dev binar{} ready in {:.1} s",
        binaries.len(),
        if binaries.len() == 1 { "y" } else { "ies" },
        started.elapsed().as_secs_f64()
    );
    Ok(binaries)
}

/// The files a dynamic executable loads, as `ldd` resolves them (the ELF interpreter among them).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .with_context(|| format!("running ldd {}", binary.display()))?;
    if !out.status.success() {
        bail!("ldd {} failed ({})", binary.display(), out.status);
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`
/// give a path; the vDSO gives none.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = line
                .split_once("=>")
                .map_or(line, |(_, right)| right.trim());
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

fn run_ok(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
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
    answers_help(binary)
}

fn answers_help(binary: &Path) -> Result<()> {
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
    fn ldd_lines_give_the_loaded_files() {
        let text = "\tlinux-vdso.so.1 (0x00007ffc)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f01)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f03)\n";
        assert_eq!(
            parse_ldd(text),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn finds_the_interpreter_of_a_dynamic_executable() {
        // This test binary is linked dynamically, as cargo builds it by default.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let found = interpreter(&me).unwrap().expect("a dynamic executable");
        assert!(found.starts_with("/lib"), "{found}");
        assert!(interpreter(b"#!/bin/sh\n").is_err());
    }
}
