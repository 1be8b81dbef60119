//! The workspace built one way only: as its tests build it (`cargo test --no-run --workspace
//! --all-features`). Cargo resolves features per invocation, from the packages it selects, so
//! `cargo test -p slurm-operator`, `cargo build -p kube-ground` and `cargo test -p slurm-exporter
//! --all-features` each compiled slurm-client's generated code (two minutes on two cores) and the kube
//! stack again: ten times in one CI run. Every build of xtask that feeds a test, an image or the test
//! ground goes through here, with the same selection and features, so each crate is compiled once and
//! the rest is cargo finding it fresh. Test binaries are then run directly (see `tests`), which also
//! holds no cargo lock while they run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// What every invocation selects. Test mode, so dev-dependencies take part in the resolution too.
const SELECTION: &[&str] = &[
    "test",
    "--no-run",
    "--workspace",
    "--all-features",
    "--message-format=json-render-diagnostics",
];

/// One executable cargo built.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Artifact {
    pub package: String,
    /// `lib`, `bin`, `test`, `bench` or `example`.
    pub kind: String,
    pub name: String,
    pub executable: PathBuf,
    pub package_dir: PathBuf,
    /// A test harness (`cargo test` runs it), not the program itself.
    pub harness: bool,
    /// The manifest's `test` flag: run by a plain `cargo test`.
    pub runs_by_default: bool,
    /// For one module of a package's single integration test binary (`tests/main.rs`, whose
    /// modules were each a binary of their own): `name` is the module, and it runs alone.
    pub module: bool,
}

/// The name of each package's one integration test target.
const INTEGRATION: &str = "integration";

/// A package's targets, from `cargo metadata`.
struct Target {
    package: String,
    kind: String,
    name: String,
    test: bool,
}

fn targets(workspace: &Path) -> Result<Vec<Target>> {
    let out = cargo(workspace)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed ({})", out.status);
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata")?;
    let mut found = Vec::new();
    for package in metadata["packages"].as_array().context("no packages")? {
        let package_name = package["name"].as_str().unwrap_or_default();
        for target in package["targets"].as_array().context("no targets")? {
            found.push(Target {
                package: package_name.to_owned(),
                kind: target["kind"][0].as_str().unwrap_or_default().to_owned(),
                name: target["name"].as_str().unwrap_or_default().to_owned(),
                test: target["test"].as_bool().unwrap_or(true),
            });
        }
    }
    Ok(found)
}

/// Everything: every package's library and binaries with their unit tests, every integration test
/// (also those with `test = false`, which CI runs in their own phase), the benchmarks and examples.
pub fn everything(workspace: &Path) -> Result<Vec<Artifact>> {
    let mut args: Vec<String> = ["--lib", "--bins", "--benches", "--examples"]
        .map(String::from)
        .to_vec();
    let all = targets(workspace)?;
    let mut tests: Vec<String> = all
        .iter()
        .filter(|t| t.kind == "test")
        .map(|t| t.name.clone())
        .collect();
    tests.sort();
    tests.dedup();
    for test in tests {
        args.extend(["--test".into(), test]);
    }
    let built = build(workspace, &all, &args)?;
    let mut split = Vec::new();
    for artifact in built {
        if artifact.kind == "test" && artifact.harness && artifact.name == INTEGRATION {
            split.extend(modules(&artifact)?);
        } else {
            split.push(artifact);
        }
    }
    Ok(split)
}

/// An integration test binary as one artifact per top-level module that holds tests, so that each
/// runs in a process of its own (as when every file was a binary) and phases pick them by name.
fn modules(artifact: &Artifact) -> Result<Vec<Artifact>> {
    let mut modules: Vec<String> = list(artifact, &[])?
        .iter()
        .filter_map(|test| test.split_once("::").map(|(module, _)| module.to_owned()))
        .collect();
    modules.dedup();
    Ok(modules
        .into_iter()
        .map(|name| Artifact {
            name,
            module: true,
            ..artifact.clone()
        })
        .collect())
}

/// The names of the tests a harness would run with `args` (its filters and `--skip`s applied).
fn list(artifact: &Artifact, args: &[String]) -> Result<Vec<String>> {
    let out = Command::new(&artifact.executable)
        .args(args)
        .args(["--list", "--format", "terse"])
        .current_dir(&artifact.package_dir)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("listing the tests of {}", artifact.executable.display()))?;
    if !out.status.success() {
        bail!(
            "{} --list failed ({})",
            artifact.executable.display(),
            out.status
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .map(str::to_owned)
        .collect())
}

/// The binaries `names` (program, not test harness), built as the tests build them. Cargo builds a
/// package's binaries for its integration tests, so one integration test of each owning package is
/// selected along; a plain `cargo build --bin` would resolve other features and compile again.
pub fn binaries(workspace: &Path, names: &[&str]) -> Result<Vec<PathBuf>> {
    let all = targets(workspace)?;
    let mut args = Vec::new();
    for name in names {
        let owner = all
            .iter()
            .find(|t| t.kind == "bin" && t.name == *name)
            .with_context(|| format!("no binary `{name}` in the workspace"))?;
        let test = all
            .iter()
            .find(|t| t.kind == "test" && t.package == owner.package)
            .with_context(|| {
                format!(
                    "package {} has no integration test to build its binary `{name}` with",
                    owner.package
                )
            })?;
        args.extend(["--test".to_owned(), test.name.clone()]);
    }
    let built = build(workspace, &all, &args)?;
    names
        .iter()
        .map(|name| {
            built
                .iter()
                .find(|a| a.kind == "bin" && !a.harness && a.name == *name)
                .map(|a| a.executable.clone())
                .with_context(|| format!("cargo reported no executable for binary `{name}`"))
        })
        .collect()
}

fn build(workspace: &Path, all: &[Target], targets_args: &[String]) -> Result<Vec<Artifact>> {
    let flags: BTreeMap<(&str, &str), bool> = all
        .iter()
        .map(|t| ((t.package.as_str(), t.name.as_str()), t.test))
        .collect();
    let mut cmd = cargo(workspace);
    cmd.args(SELECTION)
        .args(targets_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().with_context(|| format!("running {cmd:?}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut artifacts = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's messages")?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        let manifest = PathBuf::from(message["manifest_path"].as_str().unwrap_or_default());
        let package_dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
        // package_id is `path+file:///…/dir#name@version` or `…/dir#version` when the names agree.
        let id = message["package_id"].as_str().unwrap_or_default();
        let package = package_name(id);
        let name = message["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let runs_by_default = flags
            .get(&(package.as_str(), name.as_str()))
            .copied()
            .unwrap_or(true);
        artifacts.push(Artifact {
            package,
            kind: message["target"]["kind"][0]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            name,
            executable: executable.into(),
            package_dir,
            harness: message["profile"]["test"].as_bool().unwrap_or(false),
            runs_by_default,
            module: false,
        });
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(artifacts)
}

fn package_name(id: &str) -> String {
    let (path, fragment) = id.rsplit_once('#').unwrap_or((id, ""));
    match fragment.split_once('@') {
        Some((name, _version)) => name.to_owned(),
        None => path.rsplit('/').next().unwrap_or_default().to_owned(),
    }
}

fn cargo(workspace: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace)
        // A one-off build gains nothing from incremental compilation, whose caches were two thirds of
        // the target directory (20 of 29 GiB) and filled a CI machine's disk. A caller may still ask.
        .env(
            "CARGO_INCREMENTAL",
            std::env::var_os("CARGO_INCREMENTAL").unwrap_or("0".into()),
        );
    lint_when_asked(&mut cmd);
    cmd
}

/// With [`CLIPPY_DRIVER`] set, `cmd` (a cargo) compiles the workspace's crates through clippy:
/// what `cargo clippy -- -D warnings` sets, for a build instead of a check. Every cargo that is
/// to find the unified build's artifacts fresh needs it (the doc tests' too).
pub fn lint_when_asked(cmd: &mut Command) {
    if let Some(driver) = std::env::var_os(CLIPPY_DRIVER) {
        cmd.env("RUSTC_WORKSPACE_WRAPPER", driver).env(
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
        );
    }
}

/// When set (to clippy-driver's path), every build here compiles the workspace's own crates
/// through clippy with `-D warnings`, as `cargo clippy --all-targets -- -D warnings` lints them.
/// `cargo xtask test` sets it for itself and the xtask processes it starts: a separate `cargo
/// clippy` checked every dependency again, in a target directory of its own, which was a fifth of
/// a clean CI run's CPU; linting inside the one build costs the lint passes only. The wrapper is
/// part of cargo's fingerprint, so these artifacts are apart from a plain build's.
pub const CLIPPY_DRIVER: &str = "XTASK_CLIPPY_DRIVER";

/// The clippy-driver of the toolchain that builds the workspace, checked to run.
pub fn clippy_driver(workspace: &Path) -> Result<PathBuf> {
    let which = Command::new("rustup")
        .current_dir(workspace)
        .args(["which", "clippy-driver"])
        .output();
    let driver = match which {
        Ok(out) if out.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
        _ => PathBuf::from("clippy-driver"),
    };
    let runs = Command::new(&driver)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !runs {
        bail!(
            "clippy-driver ({}) does not run: install clippy (`rustup component add clippy`)",
            driver.display()
        );
    }
    Ok(driver)
}

/// Runs the test binaries `select` picks, one after the other (lib, then bins, then tests, per
/// package); stops at the first that fails.
pub fn run_tests(
    artifacts: &[Artifact],
    select: impl Fn(&Artifact) -> bool,
    args: &[String],
    env: &[(&str, String)],
) -> Result<()> {
    for mut run in test_runs(artifacts, select, args, env)? {
        eprintln!("     Running {}", run.label);
        let status = run
            .command
            .status()
            .with_context(|| format!("running {}", run.label))?;
        if !status.success() {
            bail!("tests of {} failed ({status})", run.label);
        }
    }
    Ok(())
}

/// One test binary's run (or one module's of an integration binary).
pub struct TestRun {
    /// `<package> <kind> `<name>` (<executable>)`.
    pub label: String,
    /// The module's or binary's name.
    pub name: String,
    pub command: Command,
}

/// The runs of the test binaries `select` picks, in [`run_tests`]'s order, with the caller's
/// arguments and environment; a module none of whose tests pass the filters is left out.
pub fn test_runs(
    artifacts: &[Artifact],
    select: impl Fn(&Artifact) -> bool,
    args: &[String],
    env: &[(&str, String)],
) -> Result<Vec<TestRun>> {
    let order = |kind: &str| match kind {
        "lib" => 0,
        "bin" => 1,
        _ => 2,
    };
    let mut chosen: Vec<&Artifact> = artifacts
        .iter()
        .filter(|a| a.harness && matches!(a.kind.as_str(), "lib" | "bin" | "test"))
        .filter(|a| select(a))
        .collect();
    chosen.sort_by(|a, b| {
        (&a.package, order(&a.kind), &a.name).cmp(&(&b.package, order(&b.kind), &b.name))
    });
    if chosen.is_empty() {
        bail!("no test binary matched");
    }
    let mut runs = Vec::new();
    for test in chosen {
        let mut cmd = Command::new(&test.executable);
        if test.module {
            // The module's tests by their exact names, after the caller's filters: libtest joins
            // several filters with "or", so a module filter would widen the caller's instead.
            let prefix = format!("{}::", test.name);
            let names: Vec<String> = list(test, args)?
                .into_iter()
                .filter(|name| name.starts_with(&prefix))
                .collect();
            if names.is_empty() {
                continue;
            }
            cmd.arg("--exact").args(names);
        }
        cmd.args(args)
            .current_dir(&test.package_dir)
            .env("CARGO_MANIFEST_DIR", &test.package_dir)
            .env("CARGO_PKG_NAME", &test.package);
        for (key, value) in env {
            cmd.env(key, value);
        }
        runs.push(TestRun {
            label: format!(
                "{} {} `{}` ({})",
                test.package,
                test.kind,
                test.name,
                test.executable.display()
            ),
            name: test.name.clone(),
            command: cmd,
        });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::package_name;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("path+file:///w/slurm-client#0.1.0"),
            "slurm-client"
        );
        assert_eq!(
            package_name("path+file:///w/kube-ground#kube-ground@0.0.0"),
            "kube-ground"
        );
        assert_eq!(
            package_name("registry+https://github.com/rust-lang/crates.io-index#serde@1.0.0"),
            "serde"
        );
    }
}
