//! `cargo xtask msrv`: slurm-client built with exactly the compiler its `rust-version` names.
//!
//! slurm-client's minimum supported Rust version is Debian stable's compiler (trixie's `rustc`,
//! 1.85): a user on Debian stable builds the crate with the distribution's toolchain, and CI proves
//! it with that very toolchain, not a newer rustc told to pretend. The check installs trixie's
//! `rustc` and `cargo` into a root filesystem (mmdebstrap, built once and cached under
//! /var/cache/slurm-dev/msrv/ like the Slurm roots), fails at once if that rustc is not the
//! `rust-version` of slurm-client's manifest, then packages the crate as crates.io would get it
//! (`cargo package`: workspace inheritance resolved, path-only dev-dependencies dropped, a
//! Cargo.lock trimmed from the workspace's, so the versions are those CI tests with), vendors its
//! dependencies with the host cargo, and runs Debian's cargo offline, without a network, inside the
//! root: `cargo check --locked --all-features --lib --bins` (the library with all six REST
//! versions and the `slurm` binary: every language feature and std API the code uses, and the
//! dependencies' build scripts, C included; no code generation, which would double the CPU time
//! of a check that runs in every CI run). The other workspace crates are shipped as images and keep the workspace's
//! newer `rust-version`. Raising slurm-client's `rust-version` means changing the suite below to
//! one whose rustc it names.
//!
//! The versions in Cargo.lock must build with 1.85 too: cargo refuses a dependency whose own
//! `rust-version` is newer. The workspace's resolver 3 prefers versions that fit its lowest
//! `rust-version`, so `cargo update` keeps to them; when this check names a package anyway,
//! `cargo update -p NAME --precise VERSION` pins the newest version that declares 1.85 or older.
//! A warm run takes seconds: the root is cached, and when the `.crate` is unchanged so is the
//! extracted package, which Debian's cargo then finds already built in `target/msrv/target/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::slurm::rootfs::{self, cache_dir, fnv1a};
use crate::slurm::sh::run;

/// The crate whose MSRV is checked.
const CRATE: &str = "slurm-client";

/// The Debian suite whose compiler is the MSRV: `rustc` in trixie is 1.85.
const SUITE: &str = "trixie";

/// The toolchain and what it links with (rustc depends on gcc, but be explicit: ring's build
/// script compiles C, and the binary links through cc).
const PACKAGES: &[&str] = &["rustc", "cargo", "gcc", "libc6-dev"];

/// Bump when the commands below change what the root contains.
const RECIPE: &str = "1";

/// Written last, so a root interrupted halfway is never taken for a finished one.
const READY: &str = ".msrv-ready";

/// Bump when what `package` makes of the `.crate` changes (extraction, vendoring, config).
const SCRATCH_RECIPE: &str = "1";

/// Where the scratch directory is mounted inside the root.
const INSIDE: &str = "/build";

/// Enters a private mount namespace's view of the root and runs the build there; no network
/// namespace is shared (`unshare --net`), so the build is offline by construction.
const ENTER: &str = r#"set -e
mount -t proc proc "$ROOT/proc"
mount --rbind /dev "$ROOT/dev"
mkdir -p "$ROOT$INSIDE"
mount --bind "$SCRATCH" "$ROOT$INSIDE"
exec chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
"#;

pub fn run_check(workspace: &Path) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "this needs root: it builds a Debian root with mmdebstrap and runs the build in it with \
             chroot (run it as root, e.g. `sudo -E cargo xtask msrv`)"
        );
    }
    let started = Instant::now();
    let mut steps: Vec<(String, f64)> = Vec::new();

    let step = Instant::now();
    let (root, built) = ensure_root()?;
    steps.push((
        format!(
            "Debian {SUITE} root with {} ({})",
            PACKAGES.join(" "),
            if built { "built" } else { "cached" }
        ),
        step.elapsed().as_secs_f64(),
    ));

    let step = Instant::now();
    let (version, wanted) = version_and_msrv(workspace)?;
    let rustc = run(Command::new("chroot")
        .arg(&root)
        .args(["rustc", "--version"]))?;
    let rustc = rustc.trim();
    let have = rustc
        .split_whitespace()
        .nth(1)
        .map(major_minor)
        .with_context(|| format!("cannot read the version in `{rustc}`"))?;
    if have != major_minor(&wanted) {
        bail!(
            "{CRATE}'s rust-version is {wanted}, but Debian {SUITE}'s compiler is `{rustc}`: the MSRV must \
             be a compiler CI builds with. Set rust-version in {CRATE}/Cargo.toml to {have}, or change \
             SUITE in xtask/src/msrv.rs to a Debian suite whose rustc is {wanted}"
        );
    }
    eprintln!("{CRATE}'s rust-version {wanted} is Debian {SUITE}'s `{rustc}`");
    steps.push((
        format!("rust-version {wanted} = {rustc}"),
        step.elapsed().as_secs_f64(),
    ));

    let step = Instant::now();
    let scratch = crate::target_dir(workspace).join("msrv");
    let package = package(workspace, &scratch, &version)?;
    steps.push((
        format!(
            "cargo package + cargo vendor (host cargo) into {}",
            scratch.display()
        ),
        step.elapsed().as_secs_f64(),
    ));

    let step = Instant::now();
    build(&root, &scratch, &package)?;
    steps.push((
        format!("cargo check --offline --locked --all-features --lib --bins with {rustc}"),
        step.elapsed().as_secs_f64(),
    ));

    eprintln!("\n{CRATE} builds with its MSRV, {wanted} ({rustc}):");
    for (what, secs) in &steps {
        eprintln!("  {secs:>7.1}s  {what}");
    }
    eprintln!("  {:>7.1}s  in all", started.elapsed().as_secs_f64());
    Ok(())
}

/// "1.85.1" and "1.85" are both "1.85".
fn major_minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// slurm-client's version and `rust-version`, as cargo reads them.
fn version_and_msrv(workspace: &Path) -> Result<(String, String)> {
    let out = run(Command::new(cargo()).current_dir(workspace).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
    ]))?;
    let meta: serde_json::Value = serde_json::from_str(&out).context("reading cargo metadata")?;
    let package = meta["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == CRATE))
        .with_context(|| format!("cargo metadata lists no {CRATE}"))?;
    let field = |name: &str| {
        package[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("{CRATE} has no {name} in cargo metadata"))
    };
    Ok((field("version")?, field("rust_version")?))
}

fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The root with Debian's toolchain and whether this call built it; its path changes whenever the
/// recipe does, and roots of earlier recipes are removed.
fn ensure_root() -> Result<(PathBuf, bool)> {
    let recipe = format!("{SUITE}|{}|{RECIPE}", PACKAGES.join(","));
    let root = cache_dir()
        .join("msrv")
        .join(format!("{SUITE}-{:016x}", fnv1a(recipe.as_bytes())));
    if root.join(READY).exists() {
        return Ok((root, false));
    }
    rootfs::ensure_mmdebstrap()?;
    let parent = root.parent().expect("root has a parent");
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = root.with_extension("building");
    let log = root.with_extension("log");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("removing stale {}", tmp.display()))?;
    }
    eprintln!(
        "building the Debian {SUITE} toolchain root ({}) in {} (once; log: {})",
        PACKAGES.join(" "),
        root.display(),
        log.display()
    );
    let started = Instant::now();
    let status = rootfs::mmdebstrap(SUITE, PACKAGES, &tmp, &log)?;
    if !status.success() {
        bail!(
            "building the Debian {SUITE} toolchain root failed ({status}); see {}",
            log.display()
        );
    }
    std::fs::create_dir_all(tmp.join(INSIDE.trim_start_matches('/')))?;
    std::fs::write(tmp.join(READY), RECIPE)?;
    if root.exists() {
        std::fs::remove_dir_all(&root)
            .with_context(|| format!("removing unfinished {}", root.display()))?;
    }
    std::fs::rename(&tmp, &root)?;
    eprintln!(
        "built the Debian {SUITE} toolchain root in {:.0?}",
        started.elapsed()
    );
    remove_older_roots(&root);
    Ok((root, true))
}

/// Roots of earlier recipes (hundreds of MB each) are never used again.
fn remove_older_roots(current: &Path) {
    let Some(parent) = current.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let current_log = current.with_extension("log");
    for entry in entries.flatten() {
        let path = entry.path();
        if path == current || path == current_log {
            continue;
        }
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// Packages the crate, extracts it into `scratch/src/` and vendors its dependencies into
/// `scratch/vendor/`; returns the extracted package's directory name (`{CRATE}-{version}`). When the `.crate` is the
/// one extracted last time, the extracted files are kept, so Debian's cargo finds the crate
/// unchanged and a warm run compiles nothing.
fn package(workspace: &Path, scratch: &Path, version: &str) -> Result<String> {
    std::fs::create_dir_all(scratch)?;
    // Its own target directory: nothing is compiled (--no-verify), and the .crate stays in the scratch.
    let out = scratch.join("package-target");
    run(Command::new(cargo())
        .current_dir(workspace)
        .args([
            "package",
            "--package",
            CRATE,
            "--no-verify",
            "--allow-dirty",
            "--locked",
            "--target-dir",
        ])
        .arg(&out))?;
    let name = format!("{CRATE}-{version}");
    let file = &out.join("package").join(format!("{name}.crate"));
    let src = scratch.join("src");
    let dir = src.join(&name);
    let stamp = scratch.join("src.stamp");
    let mut key = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    key.extend_from_slice(SCRATCH_RECIPE.as_bytes());
    let key = format!("{:016x}\n", fnv1a(&key));
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == key)
        && dir.join(".cargo/config.toml").exists()
        && scratch.join("vendor").exists()
    {
        eprintln!(
            "{name}: the same .crate as last time, extracted package and vendored dependencies kept"
        );
        return Ok(name);
    }
    let _ = std::fs::remove_file(&stamp);
    if src.exists() {
        std::fs::remove_dir_all(&src).with_context(|| format!("removing {}", src.display()))?;
    }
    std::fs::create_dir_all(&src)?;
    // -m: files dated now, not the fixed 2006 of every .crate: cargo compares modification times
    // to tell whether a path package changed, and would take new sources for built ones.
    run(Command::new("tar")
        .arg("-xzmf")
        .arg(file)
        .arg("-C")
        .arg(&src))?;
    if !dir.join("Cargo.lock").exists() {
        bail!(
            "{} has no Cargo.lock: --locked would resolve afresh, not with the workspace's versions",
            file.display()
        );
    }
    // Its own workspace, as in ~/.cargo/registry/src: when the target directory is inside the
    // project's workspace, cargo would otherwise take the package for a stray member of it.
    let manifest = dir.join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest)?;
    text.push_str("\n[workspace]\n");
    std::fs::write(&manifest, text)?;
    // cargo vendor replaces what the directory held with exactly the locked packages.
    run(Command::new(cargo())
        .current_dir(&dir)
        .args(["vendor", "--locked", "--versioned-dirs", "--manifest-path"])
        .arg(&manifest)
        .arg(scratch.join("vendor")))?;
    std::fs::create_dir_all(dir.join(".cargo"))?;
    std::fs::write(
        dir.join(".cargo/config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"vendored-sources\"\n\n\
             [source.vendored-sources]\ndirectory = \"{INSIDE}/vendor\"\n"
        ),
    )?;
    std::fs::write(&stamp, key)?;
    eprintln!(
        "packaged {name} from {} with its Cargo.lock, dependencies vendored in {}",
        file.display(),
        scratch.join("vendor").display()
    );
    Ok(name)
}

/// Debian's cargo in the root, offline, on the extracted package. The target directory is kept
/// between runs in the scratch directory: a warm run compiles only the crate itself.
fn build(root: &Path, scratch: &Path, package: &str) -> Result<()> {
    let script = format!(
        "cd {INSIDE}/src/{package} && cargo --version && \
         exec cargo check --offline --locked --all-features --lib --bins"
    );
    eprintln!("in the {SUITE} root, without a network: {script}");
    let status = Command::new("unshare")
        .args(["--mount", "--net", "sh", "-c", ENTER, "sh"])
        .args([
            &format!("CARGO_HOME={INSIDE}/cargo-home"),
            &format!("CARGO_TARGET_DIR={INSIDE}/target"),
            "CARGO_INCREMENTAL=0",
            // No debug info for the build scripts and proc macros it does compile.
            "CARGO_PROFILE_DEV_DEBUG=false",
            "sh",
            "-c",
            &script,
        ])
        .env("ROOT", root)
        .env("SCRATCH", scratch)
        .env("INSIDE", INSIDE)
        .stdin(Stdio::null())
        .status()
        .context("running unshare")?;
    if !status.success() {
        bail!(
            "{CRATE} does not build with Debian {SUITE}'s toolchain ({status}): see the output above"
        );
    }
    Ok(())
}
