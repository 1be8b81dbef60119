//! `cargo xtask test`: everything CI checks, in order. One build of the workspace, its tests and
//! benchmarks (running the benchmarks is `cargo xtask bench`); the tests on the Kubernetes test ground
//! with the static checks beside them; the Helm end-to-end; the rest with real Slurm clusters up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release, UpArgs};

mod background;
mod examples;

/// What a whole run writes to the target directory's disk, with room to spare: 5.1 GiB measured
/// on a clean checkout with the Slurm roots, API server and images cached (the one test build
/// 4.2 GiB, clippy's and rustdoc's metadata, the dev images); a CI machine with 8.4 GiB free
/// filled up when every integration test file was a binary of its own.
const DISK_NEEDED: u64 = 10 << 30;

/// One finished phase: its name, seconds, whether it passed, and the disk left after it.
struct Phase {
    name: String,
    secs: f64,
    ok: bool,
    free_after: Option<u64>,
}

/// Phases and how long each took, printed at the end whatever happened.
struct Timings {
    phases: Vec<Phase>,
    target_dir: PathBuf,
}

impl Timings {
    fn phase<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("==> {name}");
        let started = Instant::now();
        let result = f();
        self.phases.push(Phase {
            name: name.to_owned(),
            secs: started.elapsed().as_secs_f64(),
            ok: result.is_ok(),
            free_after: free_bytes(&self.target_dir),
        });
        result
    }

    fn print(&self) {
        eprintln!("\nphase timings (and disk free after each, where the target directory is):");
        for p in &self.phases {
            let free = p
                .free_after
                .map(|b| format!("{:>6.1} GiB free", gib(b)))
                .unwrap_or_default();
            eprintln!(
                "  {:>7.1}s  {}  {free}  {}",
                p.secs,
                if p.ok { "ok  " } else { "FAIL" },
                p.name
            );
        }
    }
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// Free bytes on the file system that holds `dir` (or its nearest existing ancestor).
fn free_bytes(dir: &Path) -> Option<u64> {
    let existing = dir.ancestors().find(|d| d.exists())?;
    let stat = nix::sys::statvfs::statvfs(existing).ok()?;
    Some(stat.blocks_available() * stat.fragment_size())
}

pub fn run(workspace: &Path, test_args: &[String]) -> Result<()> {
    let target_dir = crate::target_dir(workspace);
    if let Some(free) = free_bytes(&target_dir) {
        eprintln!(
            "{:.1} GiB free for {} (a clean run needs about {:.0} GiB)",
            gib(free),
            target_dir.display(),
            gib(DISK_NEEDED)
        );
        if free < DISK_NEEDED {
            eprintln!(
                "warning: less disk free than a clean run writes; the build may stop with \"No space left on device\""
            );
        }
    }
    let mut t = Timings {
        phases: Vec::new(),
        target_dir,
    };
    let result = run_phases(&mut t, workspace, test_args);
    let _ = t.phase("stop clusters", || {
        for release in Release::ALL {
            slurm::down(release)?;
        }
        Ok(())
    });
    let _ = crate::kube::ground::down();
    t.print();
    result
}

fn run_phases(t: &mut Timings, workspace: &Path, test_args: &[String]) -> Result<()> {
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(workspace).args(args).env(
            "CARGO_INCREMENTAL",
            std::env::var("CARGO_INCREMENTAL").unwrap_or_else(|_| "0".into()),
        );
        cmd
    };
    t.phase("cargo fmt --check", || {
        status(cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    // The test ground's API server, before the workspace: its build needs 2.7 GiB of Debian sid
    // packages (Go, the Kubernetes libraries) that are removed once it is built, so a cold run's
    // disk peak is the larger of the two, not their sum. Cached, it takes a second.
    t.phase(
        "build the Kubernetes test ground's API server (Debian sid packages + Go; cached after the first run)",
        || crate::kube::apiserver::ensure(workspace).map(drop),
    )?;
    // Once, with the features every later build and run uses (see unified.rs): the phases after
    // this one compile nothing more of it, and the benchmarks are proved to build here.
    let built = t.phase(
        "build the workspace, its tests, benchmarks and examples once (cargo test --no-run --workspace --all-features)",
        || crate::unified::everything(workspace),
    )?;
    // Real Helm (its Go SDK from PyPI, in a venv): the chart tests of each crate render through it.
    t.phase(
        "helm lint --strict of every chart (helm venv made on first use)",
        || crate::helm::lint_all(workspace),
    )?;
    t.phase("build Slurm root filesystems", || {
        for release in Release::ALL {
            slurm::rootfs::ensure(release)?;
        }
        Ok(())
    })?;
    // The xtask's own tests start and stop clusters themselves, so they run while none is up.
    for release in Release::ALL {
        slurm::down(release)?;
    }
    t.phase("xtask tests (cluster lifecycle)", || {
        crate::unified::run_tests(
            &built,
            |a| a.package == "xtask" && a.runs_by_default,
            &["--test-threads=1".into()],
            &[],
        )
    })?;
    t.phase("Kubernetes test ground up (cargo xtask kube up)", || {
        ground_up(workspace)
    })?;
    // generate --check, clippy, rustdoc, the one-version builds and the end-to-end's images
    // compile, generate or pack, and the ground tests mostly wait: they run beside them at the
    // lowest CPU priority, so the tests' pods are not slowed down.
    let xtask = built
        .iter()
        .find(|a| a.package == "xtask" && a.kind == "bin" && !a.harness)
        .context("the unified build made no xtask binary")?;
    let checks = background::Background::checks(workspace, &xtask.executable)?;
    let semver = background::Background::semver(workspace, &xtask.executable)?;
    let images = background::Background::generated_and_dev_images(
        workspace,
        &xtask.executable,
        &["e2e-upgrade".into()],
    )?;
    let kube_tests = t
        .phase(
            "API server tests (xtask's kube_apiserver)",
            || {
                crate::unified::run_tests(
                    &built,
                    |a| a.package == "xtask" && a.name == "kube_apiserver",
                    &[],
                    &[],
                )
            },
        )
        .and_then(|()| {
            t.phase(
                "test ground tests: runtime, network, kubelet, controllers, Slurm in pods (kube-ground)",
                || on_ground(&built, "kube-ground", &[]),
            )
        })
        .and_then(|()| {
            t.phase("bridge tests on the test ground (slurm-bridge)", || {
                on_ground(&built, "slurm-bridge", &["--test-threads=1".into()])
            })
        })
        .and_then(|()| {
            // One test at a time: each runs an operator and a whole Slurm cluster in pods, and
            // the operators inside the ground share its network namespace (and so its ports).
            t.phase("operator tests on the test ground (slurm-operator)", || {
                on_ground(&built, "slurm-operator", &["--test-threads=1".into()])
            })
        });
    t.phase("Kubernetes test ground down", || {
        crate::kube::ground::down().map(drop)
    })?;
    kube_tests?;
    // What users install: the project's images and charts, with real Helm, on a fresh ground.
    t.phase(
        "generated code current (generate --check), then images of the project's binaries, dev profile (image project --dev --tag e2e-upgrade); both beside the ground tests",
        || images.wait(),
    )?;
    t.phase("Kubernetes test ground up for the Helm end-to-end", || {
        ground_up(workspace)
    })?;
    let deploy = t.phase(
        "Helm end-to-end: charts and images installed, used, upgraded, uninstalled (xtask's deploy)",
        || {
            crate::unified::run_tests(
                &built,
                |a| a.package == "xtask" && a.name == "deploy",
                &["--nocapture".into()],
                &[],
            )
        },
    );
    t.phase("Kubernetes test ground down", || {
        crate::kube::ground::down().map(drop)
    })?;
    deploy?;
    t.phase(
        "clippy, rustdoc, each REST version alone, slurm-client with its MSRV (run beside the ground tests)",
        || checks.wait(),
    )?;
    t.phase(
        "semver checks of slurm-client against its last release (run beside the ground tests)",
        || semver.wait(),
    )?;
    t.phase("start Slurm 24.11 and 26.05 with accounting", || {
        for release in Release::ALL {
            slurm::up(&UpArgs {
                release,
                nodes: 4,
                accounting: true,
                port: None,
            })?;
        }
        Ok(())
    })?;
    let env_files: Vec<String> = Release::ALL
        .iter()
        .map(|r| slurm::state::env_file(*r).display().to_string())
        .collect();
    t.phase("workspace tests against both clusters", || {
        crate::unified::run_tests(
            &built,
            |a| (!ON_GROUND.contains(&a.package.as_str()) || on_slurm(a)) && a.runs_by_default,
            test_args,
            &[("SLURM_TEST_ENV_FILES", env_files.join(":"))],
        )?;
        let mut doc = cargo(&["test", "--doc", "--workspace", "--all-features"]);
        doc.env("SLURM_TEST_ENV_FILES", env_files.join(":"));
        status(doc)
    })?;
    t.phase(
        "slurm-client examples against Slurm 24.11 and 26.05",
        || examples::run(&built, &Release::ALL),
    )?;
    // Many sites run slurmrestd without slurmdbd: the exporter's tests against a 24.11
    // cluster without accounting check that it needs slurmdbd only for the accounting sources.
    t.phase("restart Slurm 24.11 without accounting", || {
        slurm::down(Release::R24_11)?;
        slurm::up(&UpArgs {
            release: Release::R24_11,
            nodes: 4,
            accounting: false,
            port: None,
        })
    })?;
    t.phase("exporter tests without slurmdbd", || {
        crate::unified::run_tests(
            &built,
            |a| a.package == "slurm-exporter" && a.runs_by_default,
            test_args,
            &[(
                "SLURM_TEST_ENV_FILES",
                slurm::state::env_file(Release::R24_11)
                    .display()
                    .to_string(),
            )],
        )
    })?;
    for release in Release::ALL {
        slurm::down(release)?;
    }
    Ok(())
}

/// The packages whose tests need the Kubernetes test ground (and run in its phases); the others run
/// against the local Slurm clusters.
const ON_GROUND: &[&str] = &["xtask", "kube-ground", "slurm-operator", "slurm-bridge"];

/// Test files of those packages that need the local Slurm clusters instead: (package, test).
const ON_SLURM: &[(&str, &str)] = &[("slurm-bridge", "old_slurm")];

fn on_slurm(a: &crate::unified::Artifact) -> bool {
    a.kind == "test" && ON_SLURM.contains(&(a.package.as_str(), a.name.as_str()))
}

/// A package's tests on the ground.
fn on_ground(built: &[crate::unified::Artifact], package: &str, args: &[String]) -> Result<()> {
    crate::unified::run_tests(
        built,
        |a| a.package == package && a.runs_by_default && !on_slurm(a),
        args,
        &[],
    )
}

fn status(mut cmd: Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// The test ground as the kube tests and the Helm end-to-end use it: three nodes, no Slurm.
fn ground_up(workspace: &Path) -> Result<()> {
    let shape = crate::kube::ground::Shape {
        nodes: 3,
        slurm: None,
    };
    crate::kube::ground::up(&shape, workspace).map(drop)
}
