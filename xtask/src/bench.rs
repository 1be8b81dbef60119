//! `cargo xtask bench`: the benchmarks that print figures, the cluster ones against a large
//! Slurm 26.05 cluster (4 real nodes, 2,000 virtual ones, accounting) started and stopped here.
//! The operator's and the bridge's benchmarks run on the Kubernetes test ground instead (`cargo xtask kube up`
//! first; without it the benchmark says it is skipped).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release, UpArgs};

const RELEASE: Release = Release::R26_05;
/// Nodes without a slurmd, on top of the 4 real ones.
pub const VIRTUAL_NODES: u32 = 2000;

/// One `cargo bench` target and whether it needs the cluster.
struct Bench {
    package: &'static str,
    name: &'static str,
    needs_cluster: bool,
}

const BENCHES: [Bench; 7] = [
    Bench {
        package: "slurm-exporter",
        name: "scale",
        needs_cluster: true,
    },
    Bench {
        package: "slurm-client",
        name: "tracking",
        needs_cluster: true,
    },
    Bench {
        package: "slurm-client",
        name: "decode",
        needs_cluster: false,
    },
    // These build their own Slurm clusters as pods on the test ground.
    Bench {
        package: "slurm-operator",
        name: "operator",
        needs_cluster: false,
    },
    Bench {
        package: "slurm-bridge",
        name: "bridge",
        needs_cluster: false,
    },
    // These need a ground with hollow nodes; skipped (and say how to start one) without them.
    Bench {
        package: "slurm-bridge",
        name: "scale",
        needs_cluster: false,
    },
    Bench {
        package: "slurm-operator",
        name: "scale",
        needs_cluster: false,
    },
];

impl Bench {
    fn exists(&self, workspace: &Path) -> bool {
        workspace
            .join(self.package)
            .join("benches")
            .join(format!("{}.rs", self.name))
            .is_file()
    }

    fn label(&self) -> String {
        format!("{} --bench {}", self.package, self.name)
    }
}

/// Runs every benchmark; `quick` asks them for fewer rounds (`SLURM_BENCH_QUICK=1`).
pub fn run(workspace: &Path, quick: bool) -> Result<()> {
    if let Some(state) = slurm::running(RELEASE)? {
        bail!(
            "a Slurm {RELEASE} cluster is already running (slurmrestd on 127.0.0.1:{}); the benchmark \
             starts its own large one and does not stop someone else's: wait for it to finish, or stop \
             it with `cargo xtask slurm down --release {RELEASE}` if it is yours",
            state.port
        );
    }
    let benches: Vec<&Bench> = BENCHES.iter().filter(|b| b.exists(workspace)).collect();
    let started = Instant::now();
    let mut timings = Vec::new();
    let result = run_benches(workspace, quick, &benches, &mut timings);
    eprintln!("\nbenchmark timings:");
    for (name, secs) in &timings {
        eprintln!("  {secs:>7.1}s  {name}");
    }
    eprintln!("  {:>7.1}s  total", started.elapsed().as_secs_f64());
    result
}

fn run_benches(
    workspace: &Path,
    quick: bool,
    benches: &[&Bench],
    timings: &mut Vec<(String, f64)>,
) -> Result<()> {
    let mut timed = |name: String, f: &mut dyn FnMut() -> Result<()>| {
        eprintln!("==> {name}");
        let started = Instant::now();
        let result = f();
        timings.push((name, started.elapsed().as_secs_f64()));
        result
    };
    // Compiled first, all in one cargo run, so the cluster is up only while the benchmarks
    // run and the release build of slurm-client is shared by every benchmark.
    timed("build the benchmarks".into(), &mut || {
        status(cargo_bench(workspace, benches, benches, quick).arg("--no-run"))
    })?;
    for bench in benches.iter().filter(|b| !b.needs_cluster) {
        timed(bench.label(), &mut || {
            status(&mut cargo_bench(workspace, benches, &[bench], quick))
        })?;
    }
    let with_cluster: Vec<&Bench> = benches
        .iter()
        .copied()
        .filter(|b| b.needs_cluster)
        .collect();
    if with_cluster.is_empty() {
        return Ok(());
    }
    let up = UpArgs {
        release: RELEASE,
        nodes: 4,
        accounting: true,
        port: None,
    };
    timed(
        format!("start Slurm {RELEASE} with {VIRTUAL_NODES} virtual nodes"),
        &mut || slurm::up_with_virtual_nodes(&up, VIRTUAL_NODES).map(drop),
    )?;
    let env_file = slurm::state::env_file(RELEASE);
    let result = with_cluster.iter().try_for_each(|bench| {
        timed(bench.label(), &mut || {
            status(
                cargo_bench(workspace, benches, &[bench], quick)
                    .env("SLURM_BENCH_ENV_FILE", &env_file),
            )
        })
    });
    let stopped = timed(format!("stop Slurm {RELEASE}"), &mut || {
        slurm::down(RELEASE).map(drop)
    });
    result.and(stopped)
}

/// `cargo bench` of `run`, with every package of `all` selected so that cargo resolves
/// the same features each time and builds nothing twice.
fn cargo_bench(workspace: &Path, all: &[&Bench], run: &[&Bench], quick: bool) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace).arg("bench");
    let mut packages: Vec<&str> = all.iter().map(|b| b.package).collect();
    packages.sort_unstable();
    packages.dedup();
    for package in packages {
        cmd.args(["--package", package]);
    }
    for bench in run {
        cmd.args(["--bench", bench.name]);
    }
    if quick {
        cmd.env("SLURM_BENCH_QUICK", "1");
    }
    cmd
}

fn status(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}
