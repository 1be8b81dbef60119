//! `cargo xtask test`: everything CI checks, in order, with real Slurm clusters up while the tests run,
//! then a build of the benchmarks (running them is `cargo xtask bench`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release, UpArgs};

/// The slurm-client features that each pull in one REST version.
const VERSION_FEATURES: [&str; 6] = [
    "v0_0_40", "v0_0_41", "v0_0_42", "v0_0_43", "v0_0_44", "v0_0_45",
];

/// What a whole run writes to the target directory's disk (6.1 GiB measured on a clean checkout
/// with incremental compilation off), with room to spare.
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

pub fn run(workspace: &Path, cargo_args: &[String]) -> Result<()> {
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
    let result = run_phases(&mut t, workspace, cargo_args);
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

fn run_phases(t: &mut Timings, workspace: &Path, cargo_args: &[String]) -> Result<()> {
    // A one-off run gains nothing from incremental compilation, whose caches were two thirds of
    // the target directory (20 of 29 GiB) and filled a CI machine's disk. A caller may still ask for it.
    let incremental = std::env::var("CARGO_INCREMENTAL").unwrap_or_else(|_| "0".into());
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(workspace)
            .args(args)
            .env("CARGO_INCREMENTAL", &incremental);
        cmd
    };
    t.phase(
        "generated code is current (cargo xtask generate --check)",
        || crate::generate::run(true),
    )?;
    t.phase("cargo fmt --check", || {
        status(cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    t.phase("cargo clippy", || {
        status(cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    // The crate docs are how a newcomer learns the client: a broken intra-doc link fails CI.
    t.phase("rustdoc of the published crates (warnings denied)", || {
        let mut cmd = cargo(&[
            "doc",
            "--no-deps",
            "--all-features",
            "--package",
            "slurm-client",
            "--package",
            "slurm-exporter",
        ]);
        cmd.env("RUSTDOCFLAGS", "-D warnings");
        status(cmd)
    })?;
    // Real Helm (its Go SDK from PyPI, in a venv): the chart tests of each crate render through it.
    t.phase(
        "helm lint --strict of every chart (helm venv made on first use)",
        || crate::helm::lint_all(workspace),
    )?;
    t.phase("each REST version compiles alone", || {
        for feature in VERSION_FEATURES {
            status(cargo(&[
                "check",
                "--package",
                "slurm-client",
                "--lib",
                "--no-default-features",
                "--features",
                feature,
            ]))?;
        }
        Ok(())
    })?;
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
        status(cargo(&["test", "-p", "xtask", "--", "--test-threads=1"]))
    })?;
    // The Kubernetes test ground: the first phase prints what the uncached build of the API server
    // (Debian sid packages, openapi-gen, go build) costs; cached, it takes a second.
    t.phase(
        "build the Kubernetes test ground's API server (Debian sid packages + Go; cached after the first run)",
        || crate::kube::apiserver::ensure(workspace).map(drop),
    )?;
    t.phase("Kubernetes test ground up (cargo xtask kube up)", || {
        ground_up(workspace)
    })?;
    let kube_tests = t
        .phase(
            "API server tests (cargo test -p xtask --test kube_apiserver)",
            || status(cargo(&["test", "-p", "xtask", "--test", "kube_apiserver"])),
        )
        .and_then(|()| {
            t.phase(
                "test ground tests: runtime, network, kubelet, controllers, Slurm in pods (cargo test -p kube-ground)",
                || status(cargo(&["test", "-p", "kube-ground"])),
            )
        })
        .and_then(|()| {
            t.phase(
                "bridge tests on the test ground (cargo test -p slurm-bridge)",
                || {
                    status(cargo(&[
                        "test",
                        "-p",
                        "slurm-bridge",
                        "--",
                        "--test-threads=1",
                    ]))
                },
            )
        })
        .and_then(|()| {
            // One test at a time: each runs an operator and a whole Slurm cluster in pods, and
            // the operators inside the ground share its network namespace (and so its ports).
            t.phase(
                "operator tests on the test ground (cargo test -p slurm-operator)",
                || {
                    status(cargo(&[
                        "test",
                        "-p",
                        "slurm-operator",
                        "--",
                        "--test-threads=1",
                    ]))?;
                    status(cargo(&["test", "-p", "slurm-operator", "--benches", "--no-run"]))
                },
            )
        });
    t.phase("Kubernetes test ground down", || {
        crate::kube::ground::down().map(drop)
    })?;
    kube_tests?;
    // What users install: the project's images and charts, with real Helm, on a fresh ground.
    t.phase(
        "images of the project's binaries, dev profile (cargo xtask image project --dev --tag e2e-upgrade)",
        || {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.current_dir(workspace)
                .args(["image", "project", "--dev", "--tag", "e2e-upgrade"]);
            status(cmd)
        },
    )?;
    t.phase("Kubernetes test ground up for the Helm end-to-end", || {
        ground_up(workspace)
    })?;
    let deploy = t.phase(
        "Helm end-to-end: charts and images installed, used, upgraded, uninstalled (cargo test -p xtask --test deploy)",
        || status(cargo(&["test", "-p", "xtask", "--test", "deploy", "--", "--nocapture"])),
    );
    t.phase("Kubernetes test ground down", || {
        crate::kube::ground::down().map(drop)
    })?;
    deploy?;
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
        // kube-ground's, slurm-operator's and slurm-bridge's tests need the Kubernetes test ground: they ran in
        // its phase above.
        let mut cmd = cargo(&[&["test"], OFF_GROUND].concat());
        cmd.args(cargo_args)
            .env("SLURM_TEST_ENV_FILES", env_files.join(":"));
        status(cmd)
    })?;
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
        let mut cmd = cargo(&["test", "--package", "slurm-exporter", "--all-features"]);
        cmd.args(cargo_args).env(
            "SLURM_TEST_ENV_FILES",
            slurm::state::env_file(Release::R24_11),
        );
        status(cmd)
    })?;
    for release in Release::ALL {
        slurm::down(release)?;
    }
    // Benchmarks are run by `cargo xtask bench` and their figures reported in the notes; CI
    // only proves they still build, in the test profile and with the same packages and features
    // as the tests before, so that their build is reused (the whole workspace at once unified
    // other features and rebuilt everything: 12 minutes). The operator's bench was built in its
    // phase on the ground.
    t.phase("benchmarks compile (cargo test --benches --no-run)", || {
        status(cargo(
            &[&["test"], OFF_GROUND, &["--benches", "--no-run"]].concat(),
        ))
    })
}

/// The packages (and features) whose tests run against the local Slurm clusters; the others
/// need the Kubernetes test ground and run in its phase.
const OFF_GROUND: &[&str] = &[
    "--workspace",
    "--exclude",
    "xtask",
    "--exclude",
    "kube-ground",
    "--exclude",
    "slurm-operator",
    "--exclude",
    "slurm-bridge",
    "--all-features",
];

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
