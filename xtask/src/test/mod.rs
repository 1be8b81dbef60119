//! `cargo xtask test`: everything CI checks, in order. One build of the workspace, its tests and
//! benchmarks (running the benchmarks is `cargo xtask bench`); the tests on the Kubernetes test ground
//! with the static checks beside them; the Helm end-to-end; the rest with real Slurm clusters up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release};

mod background;
mod examples;
mod prepare;
mod side_by_side;
mod slurm_lane;

pub use slurm_lane::run as run_slurm_lane;

/// What a whole run writes to the target directory's disk, with room to spare: 5.1 GiB measured
/// on a clean checkout with the Slurm roots, API server and images cached (the one test build
/// 4.2 GiB, clippy's and rustdoc's metadata, the dev images); a CI machine with 8.4 GiB free
/// filled up when every integration test file was a binary of its own.
const DISK_NEEDED: u64 = 10 << 30;

/// The operator's tests that cordon, relabel or annotate the ground's nodes, under every test's
/// workers (a cordon drains the Slurm nodes of each cluster with a worker there, a features
/// annotation reaches them all): they run first, one at a time, beside only the light ones.
const OPERATOR_ALONE: &[&str] = &["daemonset", "lifecycle", "topology"];

/// The operator's tests (and unit tests) that run no Slurm workers: they run beside those.
const OPERATOR_LIGHT: &[&str] = &[
    "slurm_operator",
    "slurm-operator",
    "chart",
    "chart_slurm",
    "harness",
    "leader",
    "webhook",
];

/// The operator's longest other tests (about 2 minutes each), started first.
const OPERATOR_LONGEST: &[&str] = &["cluster", "adoption", "scheduled_update"];

const TIMINGS_HEADING: &str =
    "phase timings (and disk free after each, where the target directory is):";

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
        eprintln!("\n{TIMINGS_HEADING}");
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

impl Timings {
    fn new(target_dir: PathBuf) -> Timings {
        Timings {
            phases: Vec::new(),
            target_dir,
        }
    }
}

pub fn run(workspace: &Path, test_args: &[String]) -> Result<()> {
    lint_in_the_build(workspace)?;
    // The exporter's alert rules are checked and unit-tested with promtool.
    crate::slurm::rootfs::ensure_program("promtool", "prometheus")?;
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
    let mut t = Timings::new(target_dir);
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

/// Clippy lints the workspace's crates inside the one build (see [`crate::unified::CLIPPY_DRIVER`]),
/// for this process and the xtask processes of its lanes, which inherit the variable.
#[allow(unsafe_code)]
fn lint_in_the_build(workspace: &Path) -> Result<()> {
    let driver = crate::unified::clippy_driver(workspace)?;
    // SAFETY: called first, before this process starts any thread that could read the environment.
    unsafe { std::env::set_var(crate::unified::CLIPPY_DRIVER, driver) };
    Ok(())
}

/// `cargo` in the workspace, without incremental builds unless the caller asks for them.
fn cargo(workspace: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace).args(args).env(
        "CARGO_INCREMENTAL",
        std::env::var("CARGO_INCREMENTAL").unwrap_or_else(|_| "0".into()),
    );
    // The doc tests build on the unified build's libraries: the same wrapper finds them fresh.
    crate::unified::lint_when_asked(&mut cmd);
    cmd
}

fn run_phases(t: &mut Timings, workspace: &Path, test_args: &[String]) -> Result<()> {
    t.phase("cargo fmt --check", || {
        status(cargo(workspace, &["fmt", "--all", "--", "--check"]))
    })?;
    // The Slurm roots, the Helm venv and the API server (Debian sid packages + Go) are made while
    // the workspace builds, when the disk holds both: the sid packages (2.7 GiB, removed once the
    // server is built) and the build's 4.4 GiB. Else one after the other, so that a cold run's
    // disk peak is the larger of the two. Cached, they take a second.
    let beside = free_bytes(&t.target_dir).is_some_and(|free| free >= DISK_NEEDED + (4 << 30));
    let prepare = if beside {
        eprintln!(
            "  the Slurm roots, the Helm venv and the test ground's API server are made beside the build, at nice 10"
        );
        Some(prepare::Prepare::start(workspace))
    } else {
        t.phase(
            "Slurm roots, Helm venv, the test ground's API server (Debian sid packages + Go; cached after the first run)",
            || prepare::all(workspace),
        )?;
        None
    };
    // Once, with the features every later build and run uses (see unified.rs): the phases after
    // this one compile nothing more of it, and the benchmarks are proved to build here.
    let built = t.phase(
        "build the workspace, its tests, benchmarks and examples once, its own crates through clippy -D warnings (cargo test --no-run --workspace --all-features)",
        || crate::unified::everything(workspace),
    )?;
    if let Some(prepare) = prepare {
        t.phase(
            "Slurm roots, Helm venv, the test ground's API server (made beside the build; cached after the first run)",
            || prepare.wait(),
        )?;
    }
    // The other static checks and the semver check only compile: they start now, at nice 19,
    // and take the CPU that the phases up to the end of the ground tests leave.
    let xtask = built
        .iter()
        .find(|a| a.package == "xtask" && a.kind == "bin" && !a.harness)
        .context("the unified build made no xtask binary")?;
    let checks = background::Background::checks(workspace, &xtask.executable)?;
    let semver = background::Background::semver(workspace, &xtask.executable)?;
    // Real Helm (its Go SDK from PyPI, in a venv): the chart tests of each crate render through it.
    t.phase("helm lint --strict of every chart", || {
        crate::helm::lint_all(workspace)
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
    // generate --check and the end-to-end's images generate or pack, and the ground tests mostly
    // wait: they run beside them at the lowest CPU priority, so the tests' pods are not slowed
    // down.
    let images = background::Background::generated_and_dev_images(
        workspace,
        &xtask.executable,
        &["e2e-upgrade".into()],
    )?;
    let mut on_slurm = None;
    let artifacts = t.target_dir.join("ci-artifacts.json");
    let operator_logs = t.target_dir.join("ci-operator-tests");
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
            // The tests against local Slurm clusters (their own network namespaces, nothing of
            // the ground's) start beside the bridge's, at nice 10: at the end of the run they
            // took four minutes alone.
            std::fs::write(&artifacts, serde_json::to_vec(&built)?)
                .with_context(|| format!("writing {}", artifacts.display()))?;
            on_slurm = Some(background::Background::slurm(
                workspace,
                &xtask.executable,
                &artifacts,
                test_args,
            )?);
            t.phase("bridge tests on the test ground (slurm-bridge)", || {
                on_ground(&built, "slurm-bridge", &["--test-threads=1".into()])
            })
        })
        .and_then(|()| {
            // One test at a time in each binary: each runs an operator and a whole Slurm cluster
            // in pods, and the operators inside the ground share its network namespace (and so
            // its ports); two binaries at a time (see side_by_side.rs).
            t.phase(
                "operator tests on the test ground, two at a time (slurm-operator)",
                || {
                    let runs = crate::unified::test_runs(
                        &built,
                        |a| {
                            a.package == "slurm-operator"
                                && a.runs_by_default
                                && !slurm_lane::on_slurm(a)
                        },
                        &["--test-threads=1".into()],
                        &[],
                    )?;
                    side_by_side::run_all(
                        runs,
                        OPERATOR_ALONE,
                        OPERATOR_LIGHT,
                        OPERATOR_LONGEST,
                        &operator_logs,
                    )
                },
            )
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
    // Slinky's own charts, when the machine has checkouts of them (see conformance.rs).
    let slinky_charts = crate::conformance::charts_in_env();
    if !slinky_charts.is_empty() {
        t.phase(
            "Slinky's charts installed as Helm renders them, up and running a job (cargo xtask conformance slinky, for each of $SLINKY_CHARTS)",
            || {
                ground_up(workspace)?;
                let result = slinky_charts
                    .iter()
                    .try_for_each(|chart| crate::conformance::slinky(workspace, chart, &[], false));
                crate::kube::ground::down()?;
                result
            },
        )?;
    }
    t.phase(
        "rustdoc, each REST version alone, slurm-client with its MSRV (run beside the ground tests)",
        || checks.wait(),
    )?;
    t.phase(
        "semver checks of slurm-client against its last release (run beside the ground tests)",
        || semver.wait(),
    )?;
    t.phase(
        "tests against Slurm 24.11 and 26.05: workspace, doc tests, examples, exporter without slurmdbd (run beside the ground tests)",
        || {
            on_slurm
                .context("the Slurm lane never started")?
                .wait_showing_timings()
        },
    )
}

/// A package's tests on the ground.
fn on_ground(built: &[crate::unified::Artifact], package: &str, args: &[String]) -> Result<()> {
    crate::unified::run_tests(
        built,
        |a| a.package == package && a.runs_by_default && !slurm_lane::on_slurm(a),
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
        hollow: None,
    };
    crate::kube::ground::up(&shape, workspace).map(drop)
}
